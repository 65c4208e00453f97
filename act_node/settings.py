"""Every setting of the graph once, as generate_parameter_library's YAML holds a controller's: its name, default (its
type too), description and range or choices. From this table come GraphConfig's fields (act_node.config), every
launch argument and its check (act_node.nodes.graph, launch/*.launch.py), each node's declared parameters
(act_node.nodes.parameters.declare_node) and act-sim's graph flags (act_node.cli); tests/test_settings.py fails for
any made otherwise. No ROS here: the table is read where rclpy is not installed.

    SETTINGS[name]                     a Setting: default, description, low/high or choices, its launch group
    launch_arguments(groups)           name -> (default as text, description), the launch files' and act-sim's
    check_argument(name, text)         a launch argument's text as its type, in its range: ValueError names it
    NODES[node]                        parameter -> setting: what each node declares, under which name
    OVERRIDES[(node, parameter)]       where a node needs another default, description or range, and why
    node_parameters(node)              the node's parameters: the table's, with its overrides

A launch argument whose name differs from the node's parameter (id -> robot_id, record -> root, frame_skew_s ->
skew_s) is still one setting: NODES says under which name each node takes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from act_node import so101
from act_node.chunks import COMMAND_SOURCES, ENSEMBLE_COEFF, MERGE_RULES
from act_node.observation import FRAME_MAX_AGE
from act_node.table_frame import CAMERA_NAMES, JOINT_LAYOUTS, RENDER_CHOICES

FPS = 30
CHUNK_SIZE = 100
REPLAN_EVERY = 30  # the expert's cadence and the recipes' n_action_steps (a checkpoint's own config wins)
EPISODE_STEPS = 300
DEFAULT_CAMERAS = ("front", "wrist")
TRAIN_IMAGE_SIZE = (96, 128)
SHIPPED_MODEL = "act_target_tool_yaw_grasp"  # models/act_target_tool_yaw_grasp: the trained ACT, policy:=act's default
POLICIES = ("act", "expert")
CLOCKS = ("lockstep", "realtime")
MERGE_CHOICES = ("auto", *MERGE_RULES)  # auto: the checkpoint's own way of running its chunks
TARGET_SOURCES = ("selector", "truth")
# where the selector's objects come from: the simulator's truth (scene/objects from the sim node), or the scene
# reader's reading of the front camera (act_node.perception.scene; the scene reader node in the graph)
SCENE_SOURCES = ("sim", "cameras")
READ_ON = ("request", "every")
ROBOTS = ("sim", "so101")
TELEOPS = ("", "leader")
COMPUTED = object()  # an override's default the node computes when it starts (the override says how)

# launch groups: where a launch argument goes (GraphConfig checks "graph"; act_node.nodes.graph the others);
# "node": a node's parameter only, no launch argument
GROUPS = ("graph", "placement", "robot", "frames", "record", "viewer")


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any  # its type too; a tuple is a comma-separated text on the command line and a list in ROS
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    group: str = "node"  # one of GROUPS, or "node"

    @property
    def launch(self) -> bool:
        return self.group in GROUPS


def _s(name, default, description, group="node", **limits) -> Setting:
    return Setting(name, default, description, group=group, **limits)


_TABLE = [
    # --- the graph: GraphConfig's fields, launch arguments of every graph, act-sim's flags --------------------
    _s("policy", "act", f"act (a checkpoint: the shipped models/{SHIPPED_MODEL} unless checkpoint:= says) or expert "
       "(the scripted expert)", "graph", choices=POLICIES),
    _s("checkpoint", "", f"LeRobot pretrained_model folder (policy:=act; empty: the shipped models/{SHIPPED_MODEL})",
       "graph"),
    _s("clock", "lockstep", "lockstep (the sim waits for the policy) or realtime", "graph", choices=CLOCKS),
    _s("cameras", DEFAULT_CAMERAS, f"comma-separated cameras: {', '.join(CAMERA_NAMES)}", "graph"),
    _s("rename_map", "", "which of the cameras feeds each of the checkpoint's, as lerobot-eval's --rename_map: a JSON "
       "object {\"observation.images.<camera>\": \"observation.images.<the checkpoint's camera>\"}; the policy node "
       "subscribes under the checkpoint's names, remapped onto camera/<camera>/image_raw (empty: the same names)",
       "graph"),
    _s("image_height", TRAIN_IMAGE_SIZE[0], "camera image height (pixels)", "graph", low=8, high=2160),
    _s("image_width", TRAIN_IMAGE_SIZE[1], "camera image width (pixels)", "graph", low=8, high=3840),
    _s("objects", 4, "objects on the table", "graph", low=1, high=8),
    _s("renderer", "auto", "the sim's camera renderer: auto (a camera checkpoint's own; else the faster for the image "
       "size: tiny below 32,000 pixels a frame, egl from there where it loads), egl (pybullet's EGL plugin; needs "
       "libEGL) or tiny (TinyRenderer: needs nothing)", "graph", choices=RENDER_CHOICES),
    _s("episodes", 1, "episodes before the sim stops (0: serve requests forever)", "graph", low=0),
    _s("first_seed", 0, "seed of the first episode", "graph", low=0),
    _s("replan_every", 0, f"ticks between chunks (0: the checkpoint's n_action_steps, 1 when it ensembles; "
       f"{REPLAN_EVERY} for the expert)", "graph", low=0),
    _s("camera_every", 0, "ticks between camera images from the sim: 0 renders only what is consumed (lockstep, and "
       "realtime with policy:=act: the re-plan ticks the policy answers; realtime otherwise: after each chunk, and "
       "after a second without one), 1 every tick (for RViz's image display or a recorder); a video films every "
       "tick anyway", "graph", low=0),
    _s("merge", "auto", "how the sim (or arm) merges chunks: auto (the checkpoint's own: ACT's temporal ensembling, "
       "asked every tick, when its config.json sets temporal_ensemble_coeff, as the shipped checkpoint does; "
       "else replace, the expert's too), replace (each chunk replaces the queued steps), average (half and half), "
       "ensemble (ACT's temporal ensembling, with the checkpoint's coefficient or ACT's 0.01)", "graph",
       choices=MERGE_CHOICES),
    _s("max_velocity", so101.MAX_VELOCITY_RAD_S, "joint velocity bound in rad/s applied by the sim's executor (the "
       "STS3215's no-load speed)", "graph", low=0.0),
    _s("max_steps", EPISODE_STEPS, "steps before an episode is cut off", "graph", low=1),
    _s("lockstep_timeout_s", 10.0, "lockstep: seconds of wall time without an action before the sim holds, at fps "
       "until actions come again; the episode then counts as failed (an evaluation waits longer)", "graph", low=0.0),
    _s("respawn", False, "restart a node other than the sim that exits or dies, 1 s later (launch_ros's respawn); the "
       "sim holds meanwhile and the episode it interrupted counts as failed", "graph"),
    _s("target_source", "selector", "where the target comes from: selector (the selector node) or truth (the sim's "
       "scene; no selector, so no scene is read: scene is then sim)", "graph", choices=TARGET_SOURCES),
    _s("scene", "cameras", "where the selector's objects come from: cameras (the scene reader reads them from the "
       "front camera; nothing of the simulator's truth reaches the selector or the policy; robot:=so101 needs "
       "camera_calibration:=) or sim (the simulator's truth, published by the sim node: for comparisons)", "graph",
       choices=SCENE_SOURCES),
    _s("scene_reader", "", "scene:=cameras: the scene reader's folder (reader.json, model.safetensors; '': the "
       "package's models/scene_reader)", "graph"),
    _s("camera_calibration", "", "scene:=cameras: the front camera's calibration file (act-sim calibrate writes it; "
       "'': in the sim, the camera as the sim places it; exact there, wrong anywhere else)", "graph"),
    _s("device", "cpu", "torch device for the policy", "graph"),
    _s("threads", 0, "torch threads for the policy (0: torch's default, a thread a core; under clock:=realtime in the "
       "sim graph one core fewer, which the sim keeps); act-sim eval uses 1, so that in-process and ROS evaluations "
       "do the same arithmetic", "graph", low=0),
    _s("video_dir", "", "write each episode's result (JSON) and video here", "graph"),
    _s("record_video", True, "write the videos too (false: results only)", "graph"),
    # --- where the graph runs ------------------------------------------------------------------------------
    _s("namespace", "", "ROS namespace of every node and topic of the graph (two graphs in one domain: two "
       "namespaces); empty: the root", "placement"),
    # --- robot:=so101: a real arm instead of the sim -------------------------------------------------------
    _s("robot", "sim", "sim (the PyBullet table-top) or so101 (a follower arm over LeRobot's Feetech bus)", "robot",
       choices=ROBOTS),
    _s("port", "", "so101: the follower's serial port, e.g. /dev/ttyACM0", "robot"),
    _s("id", "follower", "so101: the robot id its LeRobot calibration file is named after", "robot"),
    _s("calibration_dir", "", "so101: folder of the LeRobot calibration files, <id>.json and <leader_id>.json ('': "
       "LeRobot's default folders, the follower's and the SO leader's)", "robot"),
    _s("dry_run", False, "so101: run everything but never enable torque nor write a goal", "robot"),
    _s("camera_devices", "", "so101: one OpenCV index or path per camera, comma-separated ('': no camera nodes)",
       "robot"),
    _s("resize", False, "so101: resize camera frames to the checkpoint's size instead of refusing", "robot"),
    _s("task", "", "so101: the task text a run starts with (the policy's, run_on_start; the recorder's ~/start)",
       "robot"),
    _s("target_topic", "target/point", "so101: where the target point comes from, e.g. /clicked_point (RViz)",
       "robot"),
    _s("rest_pose", "", "so101: comma-separated radians to move to on shutdown ('': no move)", "robot"),
    # --- robot:=so101: which camera frame a joint state or a command takes, the cameras on their own clocks ---
    _s("camera_fps", "", "so101: each camera's frames a second, comma-separated in the order of cameras (its camera "
       "node's rate, and the period frame_max_age counts in); '': fps for every camera", "frames"),
    _s("frame_max_age", FRAME_MAX_AGE, "the oldest camera frame a joint state (the policy) or a command (the "
       "recorder) takes, in that camera's periods (1 / camera_fps) before its stamp, beyond frame_skew_s: each takes "
       "each camera's newest frame within it (cameras on their own clocks, an arm's); 0: only frames of its own stamp "
       "(the sim, whose streams all carry the tick's stamp)", "frames", low=0.0, high=100.0),
    _s("frame_skew_s", 0.01, "seconds within which stamps count as one instant: a camera frame stamped up to this much "
       "after the joint states or the command may be theirs (the clocks' jitter)", "frames", low=0.0, high=1.0),
    # --- teleoperation and recording, robot:=sim and robot:=so101 alike -------------------------------------
    _s("teleop", "", "leader: a person moves a leader SO-101 (the leader node) and the sim or the follower follows "
       "through the same safety chain; no policy runs ('': the policy or the expert drives)", "record",
       choices=TELEOPS),
    _s("leader_port", "", "teleop:=leader: the leader arm's serial port, e.g. /dev/ttyACM1", "record"),
    _s("leader_id", "leader", "teleop:=leader: the teleoperator id its LeRobot calibration file is named after "
       "(lerobot-calibrate --teleop.id)", "record"),
    _s("record", "", "record the graph's demonstrations into this LeRobotDataset (v3) folder, the recorder node's; it "
       "must not exist yet unless resume:=true ('': no recording)", "record"),
    _s("repo_id", "local/act_node_demonstrations", "record: the dataset's repo id (a name; nothing is uploaded)",
       "record"),
    _s("resume", False, "record: append to the dataset instead of starting one (its cameras, sizes and fps must "
       "match)", "record"),
    _s("keep_failures", False, "record, sim: keep the episodes that failed too", "record"),
    _s("environment_layout", JOINT_LAYOUTS[0], "record: observation.environment_state's layout, target (10 numbers: "
       "the target's place and the request) or target_tool (13: and the tool relative to the target, from the "
       "joints); target_tool_yaw is recorded by act-sim record (it runs the yaw reader)", "record",
       choices=JOINT_LAYOUTS),
    _s("await_nodes", "", "sim: node names, comma-separated, that must subscribe the joint command, joint states and "
       "cameras before the first episode starts, besides the recorder (a `ros2 bag record` of them is "
       "rosbag2_recorder)", "record"),
    # --- launch/sim.launch.py's viewers ----------------------------------------------------------------------
    _s("rviz", False, "true: start RViz with the package's config (needs rviz2)", "viewer"),
    # --- node parameters without a launch argument (the launch sets some of them) -----------------------------
    _s("fps", float(FPS), "ticks a second: the sim's and the arm's control rate, chunk steps 1/fps apart, the rate of "
       "act/joint_command and of the dataset", low=1.0),
    _s("chunk_size", CHUNK_SIZE, "steps in each chunk (ACT's)", low=1),
    _s("stale_after_s", 1.0, "seconds after its stamp that the newest chunk is stale and the arm holds", low=0.0),
    _s("ensemble_coeff", ENSEMBLE_COEFF, "merge ensemble: ACT's temporal_ensemble_coeff, the i-th prediction for a "
       "tick weighted exp(-coeff * i), the oldest i = 0 (the launch gives the checkpoint's)"),
    _s("command_source", "policy", "policy: execute act/action_chunk (a policy or the expert); leader: follow "
       "leader/joint_states (a person on a leader arm), through the same executor and safety chain",
       choices=COMMAND_SOURCES),
    _s("republish_s", 0.5, "lockstep: seconds between re-sent observations while waiting", low=0.01),
    _s("autostart", True, "start the first episode by itself"),
    _s("publish_truth", True, "publish the objects as they stand on scene/objects (scene:=cameras remaps it to "
       "scene/truth); false: no such publisher at all, for checking that nothing downstream needs the truth"),
    _s("await_subscriber", "", "autostart only once the nodes of these names (comma-separated) subscribe "
       "act/joint_command, joint_states and the cameras (record:= waits for act_recorder, so no frame of the first "
       "episode goes unheard; await_nodes:= adds others; '': no wait)"),
    _s("await_driver", False, "autostart only once a node publishes act/action_chunk (the policy node creates its "
       "publisher once its checkpoint is loaded): the launch sets it under clock:=realtime, whose first episode would "
       "otherwise run on the wall clock while the policy loads"),
    _s("checkpoint_units", "degrees", "the units of the checkpoint's joints: degrees, gripper 0..100 (LeRobot's "
       "use_degrees, the default since 0.4.4); the arm refuses others (older datasets' -100..100) and says why"),
    _s("status_every", 10, "ticks between servo status reads (voltage, temperature, flags)", low=1),
    # the arm's safety chain (act_node.arm.safety.SafetyConfig takes its defaults from here)
    _s("margin_rad", 0.05, "radians kept off each end of the calibrated range", low=0.0),
    _s("max_velocity_rad_s", 2.0, "joint velocity bound of the commands, rad/s (the servo's own no-load speed is "
       f"{so101.MAX_VELOCITY_RAD_S:.1f}; 2.0 leaves the body's motion unclamped)", low=0.01),
    _s("max_from_measured_rad", 0.35, "largest step of a goal from the measured position, radians (LeRobot's "
       "max_relative_target: 20 degrees)", low=0.001),
    _s("max_failed_reads", 3, "failed bus reads in a row before the arm latches a fault (3: 0.1 s of a blind arm at "
       "30 fps)", low=1),
    _s("max_tracking_error_rad", 0.4, "goal-to-measured error that latches a fault once it lasts tracking_time_s, "
       "radians", low=0.001),
    _s("tracking_time_s", 0.5, "seconds a tracking error may last before it latches a fault", low=0.001),
    _s("lerobot_max_relative_target_deg", 30.0, "LeRobot's own guard in send_action, degrees (0: off)", low=0.0),
    _s("rest_seconds", 2.0, "seconds for the move to rest_pose", low=0.0),
    _s("name", "front", "the camera's name: it publishes camera/<name>/image_raw and camera_info, frame "
       "<name>_optical"),
    _s("width", 0, "frame width to ask the camera for, pixels (0: the camera's own)", low=0),
    _s("height", 0, "frame height to ask the camera for, pixels (0: the camera's own)", low=0),
    _s("horizontal_fov_deg", 60.0, "horizontal field of view for camera_info (no calibration: a pinhole)", low=1.0,
       high=179.0),
    _s("joint_names", so101.JOINT_NAMES, "joint_states names in the checkpoint's state order"),
    _s("infer", "every_n", "every_n: answer one observation each replan_every ticks, the checkpoint's n_action_steps "
       "(the sim under both clocks, an arm); latest: the newest whenever free", choices=("every_n", "latest")),
    _s("use_target", True, "take target/point and the task's requested kind as observation.environment_state (the "
       "policy feeds it when the checkpoint takes it; the recorder records it)"),
    _s("use_scene", True, "a checkpoint that takes the planned grasp (environment_state target_tool_yaw_grasp): plan "
       "it among the objects on scene/objects, waiting for the run's (the sim's, or the scene reader's); false: among "
       "none, the requested object at the target as the yaw reader reads it (an arm whose target is a clicked "
       "point)"),
    _s("run_on_start", False, "an arm without the sim: run from the start (else on act/run or episode/start)"),
    _s("stale_s", 1.0, "seconds an observation may lie behind the newest joint state or the clock, or wait for a "
       "silent camera or joint_states, before it is refused as stale", low=0.01),
    _s("ahead_s", 1.0, "seconds a camera frame may be stamped after its joint states (or a message after the clock) "
       "before it is refused as impossible", low=0.01),
    _s("jump_back_s", 1.0, "seconds the joint states' stamps or the clock may go back before it counts as a jump back "
       "(a bag played in a loop): the run's state resets", low=0.01),
    _s("robot_type", "so101_sim", "the dataset's robot_type (so101_sim, so101_follower, ...)"),
    _s("late_s", 0.5, "seconds of newer messages after which a frame still missing a part is given up", low=0.01),
    _s("max_incomplete", 0.05, "the share of an episode's frames that may be given up before it is dropped",
       low=0.0, high=1.0),
    _s("model", "", "a selector folder (selector.json, model.safetensors); empty: the package's "
       "models/selector_lookup"),
    # the scene reader node's (scene:=cameras; act_node.nodes.scene_reader_node)
    _s("scene_camera", "front", "the camera the scene reader reads: camera/<camera>/image_raw and camera_info"),
    _s("read_on", "request", "request: one reading per episode/start, target/request or act/run, of the first frame "
       "stamped at or after it; every: each frame, at most one each period_s", choices=READ_ON),
    _s("period_s", 0.5, "read_on every: seconds between readings (0: every frame)", low=0.0),
    _s("silent_after_s", 2.0, "seconds without a frame (wall time) before /diagnostics calls the camera silent",
       low=0.1),
    _s("read_at_start", False, "read_on request: read the first frame too (an arm started with a task)"),
]
SETTINGS: dict[str, Setting] = {setting.name: setting for setting in _TABLE}
if len(SETTINGS) != len(_TABLE):
    raise RuntimeError("act_node.settings: a setting is in the table twice")

SIM_GRAPH = ("objects", "cameras", "image_height", "image_width", "clock", "merge", "replan_every", "max_velocity",
             "max_steps", "target_source", "first_seed", "episodes", "video_dir", "record_video",
             "lockstep_timeout_s", "camera_every", "renderer")
SAFETY = ("margin_rad", "max_velocity_rad_s", "max_from_measured_rad", "max_failed_reads", "max_tracking_error_rad",
          "tracking_time_s")


def _same(*names: str) -> dict[str, str]:
    return {name: name for name in names}


# what each node declares: parameter name -> the setting it is
NODES: dict[str, dict[str, str]] = {
    "act_sim": {**_same(*SIM_GRAPH, "stale_after_s", "ensemble_coeff", "republish_s", "autostart", "publish_truth",
                        "await_subscriber", "await_driver", "command_source")},
    "act_so101": {**_same("port"), "robot_id": "id", **_same("calibration_dir", "checkpoint_units", "fps", "merge",
                                                             "ensemble_coeff", "stale_after_s", "dry_run",
                                                             "status_every", *SAFETY,
                                                             "lerobot_max_relative_target_deg", "rest_pose",
                                                             "rest_seconds", "command_source")},
    "act_camera": _same("name", "device", "width", "height", "fps", "checkpoint", "resize", "horizontal_fov_deg"),
    "act_policy": {**_same("checkpoint", "device", "threads", "cameras", "joint_names", "fps"),
                   "skew_s": "frame_skew_s", **_same("frame_max_age", "camera_fps", "infer", "replan_every",
                                                     "use_target", "use_scene", "task", "run_on_start", "stale_s",
                                                     "ahead_s", "jump_back_s")},
    "act_expert": _same("fps", "chunk_size", "replan_every"),
    "act_selector": _same("model", "task"),
    "act_scene_reader": {"model": "scene_reader", "calibration": "camera_calibration", "camera": "scene_camera",
                         **_same("read_on", "period_s", "silent_after_s", "threads", "read_at_start")},
    "act_leader": {"port": "leader_port", "robot_id": "leader_id", **_same("calibration_dir", "fps")},
    "act_recorder": {"root": "record", **_same("repo_id", "resume", "cameras", "fps", "use_target",
                                               "environment_layout", "robot_type", "keep_failures", "task"),
                     "skew_s": "frame_skew_s", **_same("frame_max_age", "camera_fps", "late_s", "max_incomplete")},
}
# what a node changes while it runs (ros2 param set): the rest are read-only
CHANGEABLE: dict[str, tuple[str, ...]] = {"act_sim": ("merge", "ensemble_coeff", "max_velocity", "stale_after_s")}


@dataclass(frozen=True)
class Override:
    """A node's own default, description or range for a setting, and why it needs one."""

    reason: str
    default: Any = None  # None: the table's; COMPUTED: the node's own at start (the reason says how)
    description: str | None = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None


_RATES = "a node takes the rates as a list of numbers, where the launch argument is comma-separated text"
OVERRIDES: dict[tuple[str, str], Override] = {
    ("act_sim", "stale_after_s"): Override(
        "the sim's chunks are due every replan_every ticks: it keeps a chunk until the next is due plus half a second "
        "for its inference (GraphConfig.stale_after_s), at least a second", default=COMPUTED,
        description="seconds after its stamp that the newest chunk is stale and the arm holds (default: until the "
        "next chunk is due)"),
    ("act_sim", "ensemble_coeff"): Override(
        "a sim started by hand runs its checkpoint's own coefficient, or ACT's 0.01 (GraphConfig.chunk_merge)",
        default=COMPUTED),
    ("act_so101", "merge"): Override(
        "the arm node runs a rule; the launch resolves auto to the checkpoint's own (GraphConfig.chunk_merge)",
        default="replace", choices=MERGE_RULES),
    ("act_so101", "fps"): Override("the bus ticks no faster than its servos answer", high=200.0),
    ("act_so101", "rest_pose"): Override(_RATES.replace("the rates", "the pose") + "; one value: no move",
                                         default=[0.0]),
    ("act_leader", "fps"): Override(
        "the leader is read twice as fast as the follower ticks, so the pose the follower takes is fresh",
        default=60.0, description="reads a second, each published on leader/joint_states", high=200.0),
    ("act_camera", "device"): Override(
        "a camera node's device is the camera to open, not the policy's torch device", default="0",
        description="an OpenCV index (\"0\"), a device path (/dev/video2) or a video file, played at fps and looped "
        "(act_node.recorded_camera: a camera stand-in)"),
    ("act_camera", "fps"): Override("a camera runs at its own rate (camera_fps)",
                                    description="frames a second to ask for and to publish"),
    ("act_camera", "checkpoint"): Override(
        "a camera node only checks frame sizes against it", description="a pretrained_model folder: refuse (or "
        "resize to) frames of another size than its training images ('': no check)"),
    ("act_policy", "camera_fps"): Override(_RATES + " ([0.0]: fps for every camera)", default=[0.0]),
    ("act_recorder", "camera_fps"): Override(_RATES + " ([0.0]: fps for every camera)", default=[0.0]),
    ("act_recorder", "frame_skew_s"): Override(
        "the recorder also pairs a command with the joint states of its stamp, which one node stamps together: a "
        "tighter bound than a camera's jitter (the launch gives frame_skew_s on an arm)", default=0.005),
    ("act_selector", "task"): Override(
        "the selector takes the request from the start where an arm starts with a task (its kind is the request)",
        description="the request from the start, as a task text ('pick up the cup'); '': from target/request, "
        "episode/start or act/run"),
    ("act_scene_reader", "threads"): Override(
        "the reader reads one small frame an ask: one thread, leaving the cores to the sim and the policy",
        default=1, description="torch threads for the scene reader (0: torch's default)"),
    ("act_expert", "replan_every"): Override(
        "the expert plans at its own cadence; 0, the graph's 'the checkpoint's', means nothing to it",
        default=REPLAN_EVERY, low=1),
    ("act_policy", "cameras"): Override(
        "the policy node subscribes the cameras under the checkpoint's names (the launch gives them, renamed by "
        "rename_map)", description="the cameras the checkpoint was trained on, each read from "
                                   "camera/<name>/image_raw"),
}


def setting(name: str) -> Setting:
    if name not in SETTINGS:
        raise KeyError(f"act_node.settings has no setting {name!r}")
    return SETTINGS[name]


def node_parameters(node: str) -> list[Setting]:
    """The parameters `node` declares, under its names, with its overrides applied."""
    parameters = []
    for parameter, name in NODES[node].items():
        entry = replace(setting(name), name=parameter)
        override = OVERRIDES.get((node, name)) or OVERRIDES.get((node, parameter))
        if override is not None:
            changes = {key: getattr(override, key) for key in ("default", "description", "low", "high", "choices")
                       if getattr(override, key) is not None}
            entry = replace(entry, **changes)
        parameters.append(entry)
    return parameters


def launch_arguments(groups: tuple[str, ...] = GROUPS) -> dict[str, tuple[str, str]]:
    """Every launch argument of `groups`: name -> (default as text, description), in the table's order."""
    return {s.name: (text(s.default), s.description) for s in _TABLE if s.group in groups}


def text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def check_argument(name: str, text_value: str):
    """A launch argument's text as its setting's type, checked against its choices and range; ValueError naming it."""
    entry = setting(name)
    default, value = entry.default, str(text_value)
    try:
        if isinstance(default, bool):
            if value.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            value = value.lower() == "true"
        elif isinstance(default, int):
            value = int(value)
        elif isinstance(default, float):
            value = float(value)
            if not math.isfinite(value):
                raise ValueError("expected a finite number")
    except ValueError as error:
        kind = type(default).__name__
        raise ValueError(f"launch argument {name}:={text_value!r} is not a {kind} ({error})") from None
    if entry.choices is not None and value not in entry.choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) if not c else c for c in entry.choices)}, "
                         f"got {value!r}")
    if entry.low is not None and value < entry.low:
        raise ValueError(f"{name} must be at least {entry.low}, got {value}")
    if entry.high is not None and value > entry.high:
        raise ValueError(f"{name} must be at most {entry.high}, got {value}")
    return value
