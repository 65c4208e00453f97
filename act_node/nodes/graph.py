"""The node graph, described once: which nodes, with which parameters and remappings, for given launch
arguments. `launch/sim.launch.py` turns it into launch_ros Nodes on a ROS 2 install; `act-sim launch`
starts the same nodes as processes where the `launch` package is not installed. The arguments, their
defaults and their checks are act_node.config.GraphConfig's.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from act_node.checkpoints import check_checkpoint_folder
from act_node.config import DEFAULT_CAMERAS, FPS, SHIPPED_MODEL, GraphConfig, refuse_unknown_arguments, task_kind
from act_node.dds import profile_environment
from act_node.perception.scene import READER_CAMERA
from act_node.settings import SIM_GRAPH, check_argument, launch_arguments
from act_node.stops import LAUNCHER_VARIABLE, REFUSED, parent_death_signal
from act_node.table_frame import JOINT_LAYOUTS, YAW_LAYOUTS, YAW_READER_CAMERAS

# where the graph runs, beside what it does (GraphConfig); robot:=so101's arm; which camera frame a joint state (the
# policy) or a command (the recorder) takes on an arm, the cameras on their own clocks (the sim's streams all carry
# the tick's stamp and match exactly); teleoperation and recording. name -> (default, description), each from the
# one table (act_node.settings), checked there by check_argument
PLACEMENT_ARGUMENTS = launch_arguments(("placement",))
ROBOT_ARGUMENTS = launch_arguments(("robot",))
FRAME_ARGUMENTS = launch_arguments(("frames",))
RECORD_ARGUMENTS = launch_arguments(("record",))
LAUNCH_ARGUMENTS = {**GraphConfig.launch_arguments(), **PLACEMENT_ARGUMENTS, **ROBOT_ARGUMENTS, **FRAME_ARGUMENTS,
                    **RECORD_ARGUMENTS}
NAMESPACE = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")
SIM_PARAMETERS = SIM_GRAPH  # the launch arguments the sim node takes as parameters, under the same names
TRUTH_TOPIC = "scene/truth"  # scene:=cameras: the sim's own scene/objects (RViz beside the reading; the expert)
STOP_S = 10.0  # how long a node may take to stop after SIGINT before it gets SIGTERM, then after SIGTERM
START_GAP_S = 0.5  # between starting two nodes, so the sim (started last) finds the others listening
RESPAWN_DELAY_S = 1.0  # respawn:=true: a node that exited starts again this long after


@dataclass
class NodeSpec:
    executable: str  # console script, installed as lib/act_node/<executable> by colcon
    module: str  # python -m module runs the same node
    name: str
    parameters: dict = field(default_factory=dict)
    remappings: list[tuple[str, str]] = field(default_factory=list)
    namespace: str = ""  # "" (the root) or "/name": every relative topic and the node itself live in it
    respawn: bool = False  # restarted RESPAWN_DELAY_S after it exits (respawn:=true; never the sim)


def namespace_of(text: str) -> str:
    """A launch argument's namespace as ROS wants it: "" for the root, else "/a/b"; ValueError names it."""
    text = text.strip().rstrip("/")
    if not text:
        return ""
    namespace = text if text.startswith("/") else f"/{text}"
    if not NAMESPACE.match(namespace):
        raise ValueError(f"namespace:={text!r} is not a ROS namespace (expected names of letters, digits and "
                         "underscores, not starting with a digit, separated by /)")
    return namespace


def describe(**overrides: str) -> list[NodeSpec]:
    """The graph for these launch arguments (strings, as on a command line)."""
    overrides = dict(overrides)
    refuse_unknown_arguments(overrides, LAUNCH_ARGUMENTS)
    given = dict(overrides)
    namespace = namespace_of(str(overrides.pop("namespace", "")))
    robot = {name: str(overrides.pop(name, default)) for name, (default, _) in ROBOT_ARGUMENTS.items()}
    frames = frame_bounds({name: str(overrides.pop(name, default)) for name, (default, _) in FRAME_ARGUMENTS.items()},
                          robot["robot"], overrides.get("cameras", ",".join(DEFAULT_CAMERAS)))
    recording = {name: str(overrides.pop(name, default)) for name, (default, _) in RECORD_ARGUMENTS.items()}
    if recording["teleop"] not in ("", "leader"):
        raise ValueError(f"teleop must be '' or 'leader', got {recording['teleop']!r}")
    if recording["teleop"]:  # a person moves in real time: a lockstep sim would wait for chunks that never come
        if overrides.get("clock", "realtime") != "realtime":
            raise ValueError("teleop:=leader needs clock:=realtime (a person moves the leader in real time)")
        overrides["clock"] = "realtime"
    if recording["environment_layout"] not in JOINT_LAYOUTS:
        raise ValueError(f"environment_layout must be one of {', '.join(JOINT_LAYOUTS)} (the recorder node builds "
                         f"them from the joint states; act-sim record records target_tool_yaw), got "
                         f"{recording['environment_layout']!r}")
    if recording["record"] and robot["robot"] == "sim" and overrides.get("camera_every", "0") == "0":
        overrides["camera_every"] = "1"  # the recorder takes every tick's images
    for name, value in given.items():  # after the checks above, which say more; GraphConfig checks its own
        if name not in GraphConfig.launch_arguments():
            check_argument(name, value)  # each by the table: its type, choices and range
    config = GraphConfig.from_arguments(overrides)
    _check_start(config, robot, teleop=bool(recording["teleop"]))
    if robot["robot"] == "so101":
        if "scene" not in overrides and not config.camera_calibration:
            # the default reads the scene from the cameras where a calibration says where the front camera stands;
            # an arm without one takes its target from target_topic (a clicked point), as scene:=sim does there
            config = config.replace(scene="sim")
        nodes = describe_so101(config, robot, chosen_checkpoint=bool(overrides.get("checkpoint")),
                               teleop=bool(recording["teleop"]))
        for node in nodes:
            if node.name == "act_policy":
                node.parameters.update(frames)
            elif node.name.startswith("act_camera_"):  # each camera node at its camera's rate
                node.parameters["fps"] = frames["camera_fps"][config.cameras.index(node.parameters["name"])]
    elif robot["robot"] == "sim":
        nodes = _nodes(config, teleop=bool(recording["teleop"]))
    else:
        raise ValueError(f"robot must be 'sim' or 'so101', got {robot['robot']!r}")
    nodes += _recording_nodes(config, robot, recording)
    for node in nodes:
        if node.name == "act_recorder":
            node.parameters.update(frames)
    awaited = [name.strip() for name in recording["await_nodes"].split(",") if name.strip()]
    if recording["record"]:
        awaited.insert(0, "act_recorder")
    if awaited and robot["robot"] == "sim":  # the first episode waits for them: none of its frames goes unheard
        nodes[0].parameters["await_subscriber"] = ",".join(awaited)
    for node in nodes[1:]:  # the sim's exit is the graph's end, and the arm node is not restarted blindly
        node.respawn = config.respawn and node.name != "act_so101"
    return _placed(nodes, namespace)


def frame_bounds(arguments: dict[str, str], robot: str, cameras: str) -> dict:
    """The policy's and the recorder's frame_max_age, skew_s and camera_fps for FRAME_ARGUMENTS: on the sim,
    frame_max_age 0 (every stream carries the tick's stamp: the match is exact) and their own skew_s. ValueError
    names a bad one."""
    names = [c.strip() for c in cameras.split(",") if c.strip()]
    rates = [r.strip() for r in arguments.pop("camera_fps").split(",") if r.strip()]
    try:
        fps = [float(r) for r in rates] or [float(FPS)] * len(names)
    except ValueError:
        fps = []
    if len(fps) != len(names) or not all(0 < rate < math.inf for rate in fps):
        raise ValueError(f"camera_fps:={','.join(rates)!r} must give one rate > 0 (frames a second) per camera of "
                         f"{names}, comma-separated")
    values = {}
    for name, text in arguments.items():
        try:
            values[name] = float(text)
        except ValueError:
            values[name] = math.nan
        if not 0 <= values[name] < math.inf:
            unit = "camera periods" if name == "frame_max_age" else "seconds"
            raise ValueError(f"{name}:={text!r} must be a number >= 0 ({unit})")
    if robot != "so101":
        return {"frame_max_age": 0.0}
    return {"frame_max_age": values["frame_max_age"], "skew_s": values["frame_skew_s"], "camera_fps": fps}


def _check_start(config: GraphConfig, robot: dict[str, str], teleop: bool) -> None:
    """What can be refused before any node starts: the checkpoint folder (a run folder given for its
    pretrained_model is named) and the task, whose kind the expert and a checkpoint fed the request need."""
    if config.policy == "act" and not teleop:
        check_checkpoint_folder(config.checkpoint)
    task = robot["task"]
    if task and robot["robot"] == "sim":
        raise ValueError(f"task:={task!r} is robot:=so101's: the sim draws each episode's task from its seed "
                         "(first_seed:=)")
    needs_kind = config.policy == "expert" or config.facts.layout is not None
    if task and not teleop and needs_kind:
        task_kind(task)
    if config.scene == "cameras" and not teleop:
        check_scene_reader(config)


def check_scene_reader(config: GraphConfig) -> None:
    """scene:=cameras: the reader's folder holds a reader and the calibration file (if named) reads, before any
    node starts (a user's typo is named now, not in a node's log)."""
    from pathlib import Path

    from act_node.perception.scene import CameraCalibration, default_model_dir

    folder = Path(config.scene_reader) if config.scene_reader else default_model_dir()
    missing = [name for name in ("reader.json", "model.safetensors") if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"scene_reader:={folder} holds no scene reader (missing {', '.join(missing)})")
    if config.camera_calibration:
        try:
            CameraCalibration.load(Path(config.camera_calibration))
        except FileNotFoundError as error:
            raise ValueError(f"camera_calibration:= {error}") from None


def _recording_nodes(config: GraphConfig, robot: dict[str, str], recording: dict[str, str]) -> list[NodeSpec]:
    """The leader node (teleop:=leader) and the recorder node (record:=DIR)."""
    nodes = []
    if recording["teleop"]:
        if not recording["leader_port"]:
            raise ValueError("teleop:=leader needs leader_port:=<the leader arm's serial port>")
        nodes.append(NodeSpec("act_leader_node", "act_node.nodes.leader_node", "act_leader", {
            "port": recording["leader_port"], "robot_id": recording["leader_id"],
            "calibration_dir": robot["calibration_dir"]}))
    if recording["record"]:
        sim = robot["robot"] == "sim"
        nodes.append(NodeSpec("act_recorder_node", "act_node.nodes.recorder_node", "act_recorder", {
            "root": recording["record"], "repo_id": recording["repo_id"],
            "resume": _flag("resume", recording["resume"]), "keep_failures": _flag("keep_failures",
                                                                                   recording["keep_failures"]),
            "cameras": list(config.cameras), "fps": float(config.fps), "task": robot["task"],
            # on the arm the dataset is LeRobot's plain SO-101 one: state, images, action, task text
            "use_target": sim, "robot_type": "so101_sim" if sim else "so101_follower",
            "environment_layout": recording["environment_layout"],
            **({"use_sim_time": True} if sim else {})}))
    return nodes


def policy_threads(config: GraphConfig, realtime: bool | None = None) -> int:
    """The policy node's torch threads: `threads:=` where given; on the wall clock (the sim under clock:=realtime,
    an arm always), else, one a core less than this process may run on, so that the sim, the arm's bus loop and the
    cameras keep a core while the policy thinks (the wall clock waits for nobody; how many answers that buys:
    docs/measured_defaults.md, results/arm_cameras). Lockstep keeps torch's default: there the sim waits while the
    policy thinks."""
    if realtime is None:
        realtime = config.clock == "realtime"
    if config.threads or not realtime:
        return config.threads
    return max(1, len(os.sched_getaffinity(0)) - 1)


def _placed(nodes: list[NodeSpec], namespace: str) -> list[NodeSpec]:
    """The nodes in a namespace. Every topic name in the nodes is relative and follows it; /clock is absolute
    by convention (rclpy's time source listens there), so each node's /clock is remapped into the namespace
    too: two graphs in one domain then share nothing."""
    for node in nodes:
        node.namespace = namespace
        if namespace:
            node.remappings.append(("/clock", "clock"))
    return nodes


def _nodes(config: GraphConfig, teleop: bool = False) -> list[NodeSpec]:
    replan = config.replan_ticks()
    parameters = {name: getattr(config, name) for name in SIM_PARAMETERS}
    if teleop:
        parameters["command_source"] = "leader"
    # renderer: auto resolved against a camera checkpoint here, where the checkpoint is known
    # merge auto resolved too: ACT's temporal ensembling with the checkpoint's coefficient when its config sets one
    merge, coeff = config.chunk_merge()
    parameters.update(cameras=list(config.cameras), replan_every=replan, renderer=config.sim_renderer(), merge=merge,
                      ensemble_coeff=coeff)
    if not teleop and config.clock == "realtime":
        # the wall clock does not wait: the first episode starts once the driver publishes, not while the policy
        # loads its checkpoint (it held 134 ticks of the first episode that way)
        parameters["await_driver"] = True
    if config.policy == "act" and not teleop and config.clock == "realtime" and not config.camera_every:
        # the policy answers every replan_every ticks (every_n, below): the cameras draw on those ticks
        parameters["camera_every"] = replan
    sim = NodeSpec("act_sim_node", "act_node.nodes.sim_node", "act_sim", parameters)
    selector = NodeSpec("act_selector_node", "act_node.nodes.selector_node", "act_selector", {"use_sim_time": True})
    readers = []
    if config.scene == "cameras":  # the sim's truth to scene/truth (RViz, the expert); the reader's on scene/objects
        sim.remappings.append(("scene/objects", TRUTH_TOPIC))
        if READER_CAMERA not in config.cameras:  # the sim draws the reader's camera too (the policy ignores it)
            parameters["cameras"] = [*parameters["cameras"], READER_CAMERA]
        readers = [scene_reader(config.replace(cameras=tuple(parameters["cameras"])), {"use_sim_time": True})]
    shared = {"fps": float(config.fps), "replan_every": replan, "use_sim_time": True}
    # a policy node on a target_tool_yaw (or _grasp) checkpoint reads the yaw from these cameras (at any size: it
    # resizes each frame to the reader's; none runs in a teleoperated graph: the person drives)
    if config.policy == "act" and not teleop and config.environment_layout() in YAW_LAYOUTS:
        if not set(YAW_READER_CAMERAS) <= set(config.cameras):
            raise ValueError(f"{config.checkpoint} reads the requested object's yaw from cameras "
                             f"{','.join(YAW_READER_CAMERAS)} (act_node.perception.yaw); the graph has cameras "
                             f"{','.join(config.cameras)}: give cameras with {','.join(YAW_READER_CAMERAS)}")
    if config.policy == "act":
        policy = NodeSpec("act_policy_node", "act_node.nodes.policy_node", "act_policy", {
            **shared, "checkpoint": config.checkpoint, "device": config.device,
            "cameras": list(config.checkpoint_cameras().values()),
            # every_n under both clocks: answering the newest observation whenever free (latest) re-plans every few
            # ticks under clock:=realtime, and a checkpoint run in chunks then misses its grasps
            # (docs/measured_defaults.md). An ensembling checkpoint (the shipped one) resolves replan_every to 1:
            # an answer every tick
            "threads": policy_threads(config), "infer": "every_n", "frame_max_age": 0.0},
            remappings=camera_remappings(config))
    else:
        policy = NodeSpec("act_expert_node", "act_node.nodes.expert_node", "act_expert",
                          {**shared, "chunk_size": config.chunk_size},
                          # the expert is a teacher: it plans from the truth whatever the selector reads
                          remappings=[("scene/objects", TRUTH_TOPIC)] if config.scene == "cameras" else [])
    drivers = [] if teleop else [policy]
    return [sim, *drivers] if config.target_source == "truth" else [sim, *readers, selector, *drivers]


def scene_reader(config: GraphConfig, parameters: dict) -> NodeSpec:
    """scene:=cameras: the scene reader node on the front camera, publishing scene/objects."""
    if READER_CAMERA not in config.cameras:
        raise ValueError(f"scene:=cameras reads the {READER_CAMERA} camera; the arm has cameras "
                         f"{','.join(config.cameras)}: give cameras with {READER_CAMERA} (and its device)")
    return NodeSpec("act_scene_reader_node", "act_node.nodes.scene_reader_node", "act_scene_reader", {
        **parameters, "model": config.scene_reader, "calibration": config.camera_calibration,
        "camera": READER_CAMERA})


def describe_so101(config: GraphConfig, robot: dict[str, str], chosen_checkpoint: bool = True,
                   teleop: bool = False) -> list[NodeSpec]:
    """A real SO-101: the arm node, a camera node per `camera_devices` entry, and the policy (or the expert)
    running on wall time from the start with the `task` text. The target comes from `target_topic`.
    policy:=act needs a checkpoint named here (`chosen_checkpoint`): the shipped one was trained in the sim."""
    if not robot["port"]:
        raise ValueError("robot:=so101 needs port:=<the follower's serial port>")
    flags = {name: _flag(name, robot[name]) for name in ("dry_run", "resize")}
    try:
        rest_pose = [float(v) for v in robot["rest_pose"].split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"rest_pose:={robot['rest_pose']!r} is not comma-separated radians") from None
    replan = config.replan_ticks()
    merge, coeff = config.chunk_merge()  # as in the sim: the checkpoint's own (ACT's temporal ensembling or not)
    arm = NodeSpec("act_so101_node", "act_node.nodes.arm_node", "act_so101", {
        "port": robot["port"], "robot_id": robot["id"], "calibration_dir": robot["calibration_dir"],
        "dry_run": flags["dry_run"], "fps": float(config.fps), "merge": merge, "ensemble_coeff": coeff,
        "stale_after_s": config.stale_after_s(), "rest_pose": rest_pose or [0.0]})
    devices = [d.strip() for d in robot["camera_devices"].split(",") if d.strip()]
    if devices and len(devices) != len(config.cameras):
        raise ValueError(f"camera_devices has {len(devices)} entries for cameras {list(config.cameras)}")
    if teleop:
        arm.parameters["command_source"] = "leader"
    elif config.policy == "act" and not chosen_checkpoint:
        raise ValueError("robot:=so101 with policy:=act needs checkpoint:=<a policy trained on your arm>: the shipped "
                         f"models/{SHIPPED_MODEL} was trained in the simulation (pass it as checkpoint:= to try it "
                         "anyway)")
    camera_nodes = [NodeSpec("act_camera_node", "act_node.nodes.camera_node", f"act_camera_{name}", {
        "name": name, "device": device, "fps": float(config.fps), "checkpoint": config.checkpoint,
        "resize": flags["resize"]}) for name, device in zip(config.cameras, devices)]
    target = [("target/point", robot["target_topic"])] if robot["target_topic"] != "target/point" else []
    perception = []
    if config.scene == "cameras":  # the target from what the front camera sees: the reader, then the selector
        if not config.camera_calibration:
            raise ValueError("robot:=so101 scene:=cameras needs camera_calibration:=<file> (act-sim calibrate "
                             "writes it): where the front camera stands over the table")
        if not devices:
            raise ValueError("robot:=so101 scene:=cameras needs camera_devices:= with the front camera")
        target = []
        perception = [scene_reader(config, {"read_at_start": bool(robot["task"])}),
                      NodeSpec("act_selector_node", "act_node.nodes.selector_node", "act_selector",
                               {"task": robot["task"]})]
    if config.policy == "act":
        policy = NodeSpec("act_policy_node", "act_node.nodes.policy_node", "act_policy", {
            "checkpoint": config.checkpoint, "device": config.device,
            "cameras": list(config.checkpoint_cameras().values()),
            # every_n, as in the sim: one answer each replan_every ticks of the arm's own joint states, the
            # checkpoint's n_action_steps (1 for an ensembling one: every tick; answering whenever free would
            # re-plan at whatever cadence the machine allows)
            "threads": policy_threads(config, realtime=True), "replan_every": replan, "infer": "every_n",
            "run_on_start": bool(robot["task"]), "task": robot["task"],  # no task: a run starts on act/run
            # a grasp-planning checkpoint plans among the scene reader's objects; with a clicked target there are
            # none: from the target and the yaw read
            "use_scene": config.scene == "cameras"},
            remappings=target + camera_remappings(config))
    else:  # the expert plans from episode/start, scene/objects and the target: a simulated table behind the bus
        policy = NodeSpec("act_expert_node", "act_node.nodes.expert_node", "act_expert", {"replan_every": replan},
                          remappings=target)
    return [arm, *camera_nodes] + ([] if teleop else [*perception, policy])


def camera_remappings(config: GraphConfig) -> list[tuple[str, str]]:
    """The policy node's image topics under the checkpoint's camera names (rename_map:=) remapped onto the
    cameras' own, as a ROS user remaps a driver's topic: camera/laptop/image_raw -> camera/front/image_raw."""
    return [(f"camera/{theirs}/image_raw", f"camera/{ours}/image_raw")
            for ours, theirs in config.checkpoint_cameras().items() if theirs != ours]


def _flag(name: str, text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(f"{name}:={text!r} must be true or false")
    return text.lower() == "true"


def ros_arguments(spec: NodeSpec) -> list[str]:
    """--ros-args for a node started by hand: name, parameters, remappings."""
    arguments = ["--ros-args", "-r", f"__node:={spec.name}"]
    if spec.namespace:
        arguments += ["-r", f"__ns:={spec.namespace}"]
    for key, value in spec.parameters.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list):
            text = "[" + ",".join(str(v) for v in value) + "]"
        elif isinstance(value, str) and value == "":
            text = "''"
        else:
            text = str(value)
        arguments += ["-p", f"{key}:={text}"]
    for source, target in spec.remappings:
        arguments += ["-r", f"{source}:={target}"]
    return arguments


def run_processes(specs: list[NodeSpec], timeout_s: float | None = None) -> int:
    """Run the nodes (the sim first in `specs`) as processes: `act-sim launch`, where `launch` is missing.

    The graph runs until the sim exits (its episodes are done), another node exits (they serve until
    stopped: any exit is a failure, named), SIGINT or SIGTERM reaches this process, or the timeout.
    Then every node still running gets SIGINT, SIGTERM after STOP_S, SIGKILL after another STOP_S; the
    nodes get SIGTERM from the kernel should this process die first (Linux). The exit code: the sim's
    (0: the episodes ran), the failed node's, 124 for the timeout, 128 + the number of the signal.
    A node whose spec says `respawn` (respawn:=true) is started again RESPAWN_DELAY_S after it exits,
    as launch_ros's respawn does, instead of ending the graph. The sim is never restarted (its episodes would
    start again from first_seed); killed by a signal under respawn:=true, it leaves the others running,
    waiting for a sim (SIM_LOST), until a stop.
    """
    graph = _Processes(sim=specs[0].name, specs=specs)
    previous = {number: signal.signal(number, graph.on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        for spec in reversed(specs):  # the sim last, so the others are listening when it starts
            graph.start(spec)
            if graph.wait(START_GAP_S) is not None:
                break
        code = graph.wait(timeout_s)
        if code is None:
            _say(f"stopped after --timeout {timeout_s:g} s")
            return 124
        return code
    finally:
        graph.stop()
        for number, handler in previous.items():
            signal.signal(number, handler)


class _Processes:
    """The node processes of one graph, and what ended it (an exit code) once something has."""

    def __init__(self, sim: str, specs: list[NodeSpec] = ()):
        self.sim = sim
        self.specs = {spec.name: spec for spec in specs}
        self.running: list[tuple[str, subprocess.Popen]] = []
        self.received: int | None = None
        self.respawn_at: dict[str, float] = {}  # name -> when it starts again
        self.respawns = 0
        self.sim_lost = False  # the sim killed under respawn:=true: the others wait for one
        self._kill_with_parent = parent_death_signal() if sys.platform == "linux" else None

    def on_signal(self, number: int, _frame) -> None:
        if self.received is None:
            self.received = number

    def start(self, spec: NodeSpec) -> None:
        command = [sys.executable, "-m", spec.module, *ros_arguments(spec)]
        environment = {**os.environ, **profile_environment()}  # large camera frames arrive whole (act_node.dds)
        environment.pop(LAUNCHER_VARIABLE, None)  # a launch file's, inherited: these nodes die with act-sim instead
        self.running = [(name, process) for name, process in self.running if name != spec.name]
        self.running.append((spec.name, subprocess.Popen(command, env=environment,
                                                         preexec_fn=self._kill_with_parent)))

    def wait(self, seconds: float | None) -> int | None:
        """Poll until the graph has an exit code (returned) or `seconds` pass (None)."""
        end = None if seconds is None else time.monotonic() + seconds
        while end is None or time.monotonic() < end:
            code = self.outcome()
            if code is not None:
                return code
            time.sleep(0.05)
        return None

    def outcome(self) -> int | None:
        if self.received is not None:  # first: a Ctrl-C reaches the sim too, which may exit 0 at once
            _say(f"stopped by {signal.Signals(self.received).name}")
            return 128 + self.received
        now = time.monotonic()
        for name, due in list(self.respawn_at.items()):
            if now >= due:
                del self.respawn_at[name]
                self.respawns += 1
                _say(f"respawning {name} (respawn:=true)")
                self.start(self.specs[name])
        for name, process in self.running:
            code = process.poll()
            if code is None or name in self.respawn_at:
                continue
            if name != self.sim and name in self.specs and self.specs[name].respawn and code != REFUSED:
                how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
                _say(f"node {name} {how}; respawning it in {RESPAWN_DELAY_S:g} s")
                self.respawn_at[name] = now + RESPAWN_DELAY_S
                continue
            if name == self.sim:
                if self.sim_lost:
                    continue
                if code < 0 and any(spec.respawn for spec in self.specs.values()):
                    self.sim_lost = True
                    _say(SIM_LOST.format(how=f"was killed by {signal.Signals(-code).name}"))
                    continue
                if code != 0 and self.specs.get(name) and self.specs[name].module.endswith("arm_node"):
                    _say(f"the arm node {name} exited with code {code}"
                         + (": it refused to start (the reason is above)" if code == 2 else ""))
                elif code != 0:
                    _say(f"the sim node {name} exited with code {code}: its episodes did not all run")
                return code if code >= 0 else 128 - code  # -N: killed by signal N
            if code == REFUSED:  # it said why; started again it would refuse again (respawn:=true too)
                _say(f"node {name} refused to start (exit code {REFUSED}, why above); stopping the graph")
                return code
            _say(f"node {name} exited with code {code} while the graph was running; stopping the graph")
            return code if code > 0 else 1
        return None

    def stop(self) -> None:
        for escalation in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            alive = [(name, process) for name, process in self.running if process.poll() is None]
            if not alive:
                return
            if escalation != signal.SIGINT:
                _say(f"{', '.join(name for name, _ in alive)} did not stop within {STOP_S:g} s: "
                     f"{signal.Signals(escalation).name}")
            for _, process in alive:
                process.send_signal(escalation)
            end = time.monotonic() + STOP_S
            for _, process in alive:
                try:
                    process.wait(timeout=max(0.0, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass


SIM_LOST = ("the sim node {how} (respawn:=true): it is not restarted (its episodes would start again from "
            "first_seed); the other nodes keep running and wait for a sim: start one in this graph's domain and "
            "namespace (ros2 run act_node act_sim_node, with the episodes still wanted), or stop the graph (Ctrl-C)")


def _say(text: str) -> None:
    print(f"act-sim launch: {text}", file=sys.stderr, flush=True)
