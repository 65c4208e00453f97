"""The table-top as every layer names it: its frame and size, the kinds of object, the cameras, the renderers.

The table-top (objects, world), the find-the-cup networks (tokens, one-hots), the observation the policy reads
(the request one-hot), the configuration (camera and renderer names) and the ROS messages (frame ids) take
these from here; nothing here imports anything,
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


def kind_index(kind: str) -> int:
    """The kind's place in KIND_NAMES; ValueError naming the kinds for an unknown one."""
    if kind not in KIND_NAMES:
        raise ValueError(f"unknown object kind {kind!r}; expected one of {list(KIND_NAMES)}")
    return KIND_NAMES.index(kind)
