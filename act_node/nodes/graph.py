"""The node graph, described once: which nodes, with which parameters and remappings, for given launch
arguments. `launch/sim.launch.py` turns it into launch_ros Nodes on a ROS 2 install; `act-sim launch`
starts the same nodes as processes where the `launch` package is not installed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

LAUNCH_ARGUMENTS = {  # name: (default, description)
    "checkpoint": ("", "LeRobot pretrained_model folder (policy:=act)"),
    "policy": ("expert", "act (a checkpoint) or expert (the scripted expert)"),
    "clock": ("lockstep", "lockstep (the sim waits for the policy) or realtime"),
    "cameras": ("front,wrist", "comma-separated cameras: front, top, wrist"),
    "image_height": ("120", "camera image height"),
    "image_width": ("160", "camera image width"),
    "objects": ("4", "objects on the table"),
    "episodes": ("1", "episodes before the sim stops (0: serve requests forever)"),
    "first_seed": ("0", "seed of the first episode"),
    "replan_every": ("0", "ticks between chunks (0: the checkpoint's n_action_steps, 30 for the expert)"),
    "merge": ("replace", "chunk merge rule: replace, average, ensemble"),
    "max_velocity": ("4.7", "joint velocity bound in rad/s applied by the sim's executor (STS3215 no-load speed)"),
    "max_steps": ("300", "steps before an episode is cut off"),
    "device": ("cpu", "torch device for the policy"),
    "video_dir": ("", "write each episode's result (JSON) and video here"),
    "record_video": ("true", "write the videos too (false: results only)"),
    # robot:=so101: a real arm instead of the sim (see describe_so101)
    "robot": ("sim", "sim (the PyBullet table-top) or so101 (a follower arm over LeRobot's Feetech bus)"),
    "port": ("", "so101: the follower's serial port, e.g. /dev/ttyACM0"),
    "id": ("follower", "so101: the robot id its LeRobot calibration file is named after"),
    "calibration_dir": ("", "so101: folder of <id>.json ('' : LeRobot's default)"),
    "dry_run": ("false", "so101: run everything but never enable torque nor write a goal"),
    "camera_devices": ("", "so101: one OpenCV index or path per camera, comma-separated ('': no camera nodes)"),
    "resize": ("false", "so101: resize camera frames to the checkpoint's size instead of refusing"),
    "task": ("", "so101: the task text the run starts with"),
    "target_topic": ("/target/point", "so101: where the target point comes from, e.g. /clicked_point (RViz)"),
    "rest_pose": ("", "so101: comma-separated radians to move to on shutdown ('': no move)"),
}
EXPERT_REPLAN = 30
FPS = 30


@dataclass
class NodeSpec:
    executable: str  # console script, installed as lib/act_node/<executable> by colcon
    module: str  # python -m module runs the same node
    name: str
    parameters: dict = field(default_factory=dict)
    remappings: list[tuple[str, str]] = field(default_factory=list)


def replan_ticks(arguments: dict[str, str]) -> int:
    """The chunk cadence both the policy and the sim use: given, the checkpoint's n_action_steps, or the
    expert's default."""
    given = int(arguments["replan_every"])
    if given:
        return given
    if arguments["policy"] == "act":
        config = Path(arguments["checkpoint"]) / "config.json"
        try:
            return int(json.loads(config.read_text())["n_action_steps"])
        except (OSError, KeyError, ValueError) as error:
            raise ValueError(f"cannot read n_action_steps from {config}: {error}") from None
    return EXPERT_REPLAN


def describe(**overrides: str) -> list[NodeSpec]:
    """The graph for these launch arguments (strings, as on a command line)."""
    unknown = sorted(set(overrides) - set(LAUNCH_ARGUMENTS))
    if unknown:
        raise ValueError(f"unknown launch arguments {unknown}; known: {sorted(LAUNCH_ARGUMENTS)}")
    arguments = {name: str(overrides.get(name, default)) for name, (default, _) in LAUNCH_ARGUMENTS.items()}
    if arguments["policy"] not in ("act", "expert"):
        raise ValueError(f"policy must be 'act' or 'expert', got {arguments['policy']!r}")
    if arguments["policy"] == "act" and not arguments["checkpoint"]:
        raise ValueError("policy:=act needs checkpoint:=<pretrained_model folder>")
    cameras = [c.strip() for c in arguments["cameras"].split(",") if c.strip()]
    replan = replan_ticks(arguments)
    if arguments["robot"] == "so101":
        return describe_so101(arguments, cameras, replan)
    if arguments["robot"] != "sim":
        raise ValueError(f"robot must be 'sim' or 'so101', got {arguments['robot']!r}")
    sim = NodeSpec("act_sim_node", "act_node.nodes.sim_node", "act_sim", {
        "objects": int(arguments["objects"]), "cameras": cameras, "image_height": int(arguments["image_height"]),
        "image_width": int(arguments["image_width"]), "clock": arguments["clock"], "merge": arguments["merge"],
        "episodes": int(arguments["episodes"]), "first_seed": int(arguments["first_seed"]),
        "replan_every": replan, "video_dir": arguments["video_dir"],
        "max_velocity_rad_s": float(arguments["max_velocity"]), "max_steps": int(arguments["max_steps"]),
        # a chunk must stay usable until the next one is due
        "stale_after_s": max(1.0, (replan + 1) / FPS),
        "record_video": arguments["record_video"].lower() == "true"})
    selector = NodeSpec("act_selector_node", "act_node.nodes.selector_node", "act_selector",
                        {"use_sim_time": True})
    realtime = arguments["clock"] == "realtime"
    if arguments["policy"] == "act":
        policy = NodeSpec("act_policy_node", "act_node.nodes.policy_node", "act_policy", {
            "checkpoint": arguments["checkpoint"], "device": arguments["device"], "cameras": cameras,
            "replan_every": replan, "infer": "latest" if realtime else "every_n", "use_sim_time": True})
    else:
        policy = NodeSpec("act_expert_node", "act_node.nodes.expert_node", "act_expert",
                          {"replan_every": replan, "use_sim_time": True})
    return [sim, selector, policy]


def describe_so101(arguments: dict[str, str], cameras: list[str], replan: int) -> list[NodeSpec]:
    """A real SO-101: the arm node, a camera node per `camera_devices` entry, and the policy (or the expert)
    running on wall time from the start with the `task` text. The target comes from `target_topic`."""
    if not arguments["port"]:
        raise ValueError("robot:=so101 needs port:=<the follower's serial port>")
    arm = NodeSpec("act_so101_node", "act_node.nodes.arm_node", "act_so101", {
        "port": arguments["port"], "robot_id": arguments["id"], "calibration_dir": arguments["calibration_dir"],
        "dry_run": arguments["dry_run"].lower() == "true", "fps": float(FPS), "merge": arguments["merge"],
        "stale_after_s": max(1.0, (replan + 1) / FPS),
        "rest_pose": [float(v) for v in arguments["rest_pose"].split(",") if v.strip()] or [0.0]})
    devices = [d.strip() for d in arguments["camera_devices"].split(",") if d.strip()]
    if devices and len(devices) != len(cameras):
        raise ValueError(f"camera_devices has {len(devices)} entries for cameras {cameras}")
    camera_nodes = [NodeSpec("act_camera_node", "act_node.nodes.camera_node", f"act_camera_{name}", {
        "name": name, "device": device, "fps": float(FPS), "checkpoint": arguments["checkpoint"],
        "resize": arguments["resize"].lower() == "true"}) for name, device in zip(cameras, devices)]
    target = [("/target/point", arguments["target_topic"])] if arguments["target_topic"] != "/target/point" else []
    if arguments["policy"] == "act":
        policy = NodeSpec("act_policy_node", "act_node.nodes.policy_node", "act_policy", {
            "checkpoint": arguments["checkpoint"], "device": arguments["device"], "cameras": cameras,
            "replan_every": replan, "infer": "latest", "run_on_start": True, "task": arguments["task"]},
            remappings=target)
    else:  # the expert plans from /episode/start, /scene/objects and the target: a simulated table behind the bus
        policy = NodeSpec("act_expert_node", "act_node.nodes.expert_node", "act_expert", {"replan_every": replan},
                          remappings=target)
    return [arm, *camera_nodes, policy]


def ros_arguments(spec: NodeSpec) -> list[str]:
    """--ros-args for a node started by hand: name, parameters, remappings."""
    arguments = ["--ros-args", "-r", f"__node:={spec.name}"]
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
