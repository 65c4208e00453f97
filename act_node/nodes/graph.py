"""The node graph, described once: which nodes, with which parameters and remappings, for given launch
arguments. `launch/sim.launch.py` turns it into launch_ros Nodes on a ROS 2 install; `act-sim launch`
starts the same nodes as processes where the `launch` package is not installed. The arguments, their
defaults and their checks are act_node.config.GraphConfig's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from act_node.config import GraphConfig

LAUNCH_ARGUMENTS = GraphConfig.launch_arguments()  # name: (default, description)
# the launch arguments the sim node takes as parameters, under the same names
SIM_PARAMETERS = ("objects", "cameras", "image_height", "image_width", "clock", "merge", "replan_every",
                  "max_velocity", "max_steps", "target_source", "first_seed", "episodes", "video_dir", "record_video")


@dataclass
class NodeSpec:
    executable: str  # console script, installed as lib/act_node/<executable> by colcon
    module: str  # python -m module runs the same node
    name: str
    parameters: dict = field(default_factory=dict)
    remappings: list[tuple[str, str]] = field(default_factory=list)


def describe(**overrides: str) -> list[NodeSpec]:
    """The graph for these launch arguments (strings, as on a command line)."""
    return describe_config(GraphConfig.from_arguments(overrides))


def describe_config(config: GraphConfig) -> list[NodeSpec]:
    replan = config.replan_ticks()
    parameters = {name: getattr(config, name) for name in SIM_PARAMETERS}
    parameters.update(cameras=list(config.cameras), replan_every=replan)
    sim = NodeSpec("act_sim_node", "act_node.nodes.sim_node", "act_sim", parameters)
    selector = NodeSpec("act_selector_node", "act_node.nodes.selector_node", "act_selector", {"use_sim_time": True})
    shared = {"fps": float(config.fps), "replan_every": replan, "use_sim_time": True}
    if config.policy == "act":
        policy = NodeSpec("act_policy_node", "act_node.nodes.policy_node", "act_policy", {
            **shared, "checkpoint": config.checkpoint, "device": config.device, "cameras": list(config.cameras),
            "infer": "latest" if config.clock == "realtime" else "every_n"})
    else:
        policy = NodeSpec("act_expert_node", "act_node.nodes.expert_node", "act_expert",
                          {**shared, "chunk_size": config.chunk_size})
    return [sim, policy] if config.target_source == "truth" else [sim, selector, policy]


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
