"""The node graph, described once: which nodes, with which parameters and remappings, for given launch
arguments. `launch/sim.launch.py` turns it into launch_ros Nodes on a ROS 2 install; `act-sim launch`
starts the same nodes as processes where the `launch` package is not installed. The arguments, their
defaults and their checks are act_node.config.GraphConfig's.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from act_node.config import GraphConfig

# where the graph runs, beside what it does (GraphConfig): name -> (default, description)
PLACEMENT_ARGUMENTS = {"namespace": ("", "ROS namespace of every node and topic of the graph (two graphs in one "
                                         "domain: two namespaces); empty: the root")}
LAUNCH_ARGUMENTS = {**GraphConfig.launch_arguments(), **PLACEMENT_ARGUMENTS}  # name: (default, description)
NAMESPACE = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")
# the launch arguments the sim node takes as parameters, under the same names
SIM_PARAMETERS = ("objects", "cameras", "image_height", "image_width", "clock", "merge", "replan_every",
                  "max_velocity", "max_steps", "target_source", "first_seed", "episodes", "video_dir", "record_video",
                  "lockstep_timeout_s")
STOP_S = 10.0  # how long a node may take to stop after SIGINT before it gets SIGTERM, then after SIGTERM
START_GAP_S = 0.5  # between starting two nodes, so the sim (started last) finds the others listening


@dataclass
class NodeSpec:
    executable: str  # console script, installed as lib/act_node/<executable> by colcon
    module: str  # python -m module runs the same node
    name: str
    parameters: dict = field(default_factory=dict)
    remappings: list[tuple[str, str]] = field(default_factory=list)
    namespace: str = ""  # "" (the root) or "/name": every relative topic and the node itself live in it


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
    namespace = namespace_of(str(overrides.pop("namespace", "")))
    return describe_config(GraphConfig.from_arguments(overrides), namespace)


def describe_config(config: GraphConfig, namespace: str = "") -> list[NodeSpec]:
    """The nodes for this config. In a namespace, every topic name in the nodes is relative and follows it;
    /clock is absolute by convention (rclpy's time source listens there), so each node's /clock is
    remapped into the namespace too: two graphs in one domain then share nothing."""
    nodes = _nodes(config)
    for node in nodes:
        node.namespace = namespace
        if namespace:
            node.remappings.append(("/clock", "clock"))
    return nodes


def _nodes(config: GraphConfig) -> list[NodeSpec]:
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
    """
    graph = _Processes(sim=specs[0].name)
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

    def __init__(self, sim: str):
        self.sim = sim
        self.running: list[tuple[str, subprocess.Popen]] = []
        self.received: int | None = None
        self._kill_with_parent = _parent_death_signal() if sys.platform == "linux" else None

    def on_signal(self, number: int, _frame) -> None:
        if self.received is None:
            self.received = number

    def start(self, spec: NodeSpec) -> None:
        command = [sys.executable, "-m", spec.module, *ros_arguments(spec)]
        self.running.append((spec.name, subprocess.Popen(command, preexec_fn=self._kill_with_parent)))

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
        for name, process in self.running:
            code = process.poll()
            if code is None:
                continue
            if name == self.sim:
                if code != 0:
                    _say(f"the sim node {name} exited with code {code}: its episodes did not all run")
                return code if code >= 0 else 128 - code  # -N: killed by signal N
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


def _parent_death_signal():
    """A preexec_fn for a node's process: SIGTERM to the node when its parent dies, even by SIGKILL."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the forked child
    pr_set_pdeathsig = 1  # <linux/prctl.h>

    def die_with_parent() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM))

    return die_with_parent


def _say(text: str) -> None:
    print(f"act-sim launch: {text}", file=sys.stderr, flush=True)
