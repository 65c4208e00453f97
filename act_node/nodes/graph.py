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
