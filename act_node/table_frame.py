"""The table-top as every layer names it: its frame and size, the kinds of object, the cameras, the renderers.

The table-top (objects, world), the find-the-cup networks (tokens, one-hots), the observation the policy reads
(the request one-hot, environment_state's layouts), the configuration (camera and renderer names) and the ROS
messages (frame ids) take these from here; nothing here imports anything,
so a module that needs a kind's name does not load pybullet or torch for it.
"""

TABLE_FRAME = "table"  # ROS frame: origin at a corner, x and y along the edges, z up (REP-103)
TABLE_SIZE_M = 1.0  # the table is TABLE_SIZE_M x TABLE_SIZE_M; positions on it lie in [0, TABLE_SIZE_M]
# The object kinds, in the one order of every one-hot (the networks' tokens, environment_state's request)
KIND_NAMES = ("cube", "ball", "cup", "pen", "box", "can", "key", "toy")
# The cameras the table-top has (act_node.tabletop.cameras.CAMERAS places them)
CAMERA_NAMES = ("front", "top", "wrist")
# The renderers the world can draw the cameras with (World(renderer=...)): pybullet's TinyRenderer, and its
# EGL plugin (ER_BULLET_HARDWARE_OPENGL through EGL: Mesa's llvmpipe here, a GPU's driver where there is one).
RENDERERS = ("tiny", "egl")
# What a user may ask for: a renderer, or "auto": the faster one for the cameras' size (EGL_FROM_PIXELS in
# act_node.tabletop.cameras), EGL only where its plugin loads. A checkpoint that takes images pins "auto" to the
# renderer of the dataset it was trained on (GraphConfig.sim_renderer).
RENDER_CHOICES = ("auto", *RENDERERS)


# Four layouts of environment_state, each a prefix of the next (the names line up); every path builds the layout
# the checkpoint or the dataset says (its size names it):
#   "target"       (10) the target's x, y (metres, table frame), then the request one-hot over the object kinds
#                       (ACT takes no language: the request enters here)
#   "target_tool"  (13) and where the tool is relative to that target: the tool centre point minus the target in
#                       x and y, and the tool's height, by the URDF's forward kinematics from the joints
#                       (act_node.description.ArmChain). Nothing in it is privileged: the joints and the
#                       Selector's target exist on the real arm too (what it changes: docs/measured_defaults.md).
#   "target_tool_yaw" (15) and how the requested object lies: (cos k*yaw, sin k*yaw), k its symmetry (a pen 2,
#                       the cube 4; zeros for a round kind), read from the front and wrist cameras at the
#                       episode's first observation by the yaw reader (act_node.perception.yaw, models/yaw_reader;
#                       what it changes: docs/measured_defaults.md).
#   "target_tool_yaw_grasp" (19) and the grasp the expert's planner chooses for this scene at the episode's first
#                       observation (act_node.grasp): cos and sin of the wrist roll at the close, and the
#                       tool centre point at the close minus the target in x and y. Planned from the joints, the
#                       Selector's target and the objects on scene/objects (the scene reader's with
#                       scene:=cameras), the requested object's yaw the yaw reader's where no scene is read.
ENV_LAYOUTS = ("target", "target_tool", "target_tool_yaw", "target_tool_yaw_grasp")
TOOL_NAMES = ["tcp_minus_target_x", "tcp_minus_target_y", "tcp_z"]
YAW_NAMES = ["target_cos_n_yaw", "target_sin_n_yaw"]
GRASP_NAMES = ["grasp_cos_roll", "grasp_sin_roll", "grasp_tcp_minus_target_x", "grasp_tcp_minus_target_y"]
# The layouts that read the requested object's yaw from the cameras (the yaw reader), and the one that plans a grasp
YAW_LAYOUTS = ("target_tool_yaw", "target_tool_yaw_grasp")
GRASP_LAYOUTS = ("target_tool_yaw_grasp",)
# The layouts built from the joint states and the target alone: the recorder node and bag2dataset record these;
# target_tool_yaw (and _grasp) also needs the yaw reader's camera images at 96x128 (act-sim record and the policy
# node read it).
JOINT_LAYOUTS = ("target", "target_tool")
# What the yaw reader reads (act_node.perception.yaw): these cameras at this size (height, width), drawn as the
# recipe draws them (TinyRenderer in the sim). A graph running a target_tool_yaw checkpoint publishes them so.
YAW_READER_CAMERAS = ("front", "wrist")
YAW_READER_IMAGE_SIZE = (96, 128)


def environment_state_names(layout: str = "target") -> list[str]:
    """The names of environment_state's entries in `layout` (ENV_LAYOUTS)."""
    names = ["target_x", "target_y", *(f"request_{kind}" for kind in KIND_NAMES)]
    if layout == "target":
        return names
    if layout == "target_tool":
        return [*names, *TOOL_NAMES]
    if layout == "target_tool_yaw":
        return [*names, *TOOL_NAMES, *YAW_NAMES]
    if layout == "target_tool_yaw_grasp":
        return [*names, *TOOL_NAMES, *YAW_NAMES, *GRASP_NAMES]
    raise ValueError(f"unknown environment_state layout {layout!r}; expected one of {list(ENV_LAYOUTS)}")


def environment_layout(size: int) -> str:
    """The layout whose environment_state has `size` entries (a checkpoint's or a dataset's shape);
    ValueError naming the sizes there are."""
    for layout in ENV_LAYOUTS:
        if len(environment_state_names(layout)) == size:
            return layout
    sizes = {layout: len(environment_state_names(layout)) for layout in ENV_LAYOUTS}
    raise ValueError(f"an environment_state of {size} entries is none of act_node's layouts {sizes}")


def kind_index(kind: str) -> int:
    """The kind's place in KIND_NAMES; ValueError naming the kinds for an unknown one."""
    if kind not in KIND_NAMES:
        raise ValueError(f"unknown object kind {kind!r}; expected one of {list(KIND_NAMES)}")
    return KIND_NAMES.index(kind)
