"""`act-sim ctl`, the ros2 CLI calls docs/arm.md asks for, each run as a user runs it (a process of its own) against
running nodes: the arm node's stop, e-stop and reset on the simulated bus; a run, its end and a target for the policy
node; the recorder's start (with its task) and stop; a bag of the graph's topics that act-sim bag2dataset reads."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from arm_helpers import ROBOT_ID, START_RAD, calibration, write_calibration
from conftest import retire, wait_for
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image, JointState

from act_node import so101
from act_node.arm.servo_sim import SimulatedBus
from act_node.nodes import messages
from act_node.nodes.messages import COMMANDS, SENSOR


def ctl(*arguments: str, wait: float = 20.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "act_node.cli", "ctl", *arguments, "--wait", f"{wait:g}"],
                          capture_output=True, text=True, timeout=120)


def test_stop_estop_and_reset_reach_the_arm_node_on_the_simulated_bus(tmp_path):
    with SimulatedBus(calibration(), start_rad=START_RAD) as bus:
        write_calibration(tmp_path)
        node = subprocess.Popen([sys.executable, "-m", "act_node.nodes.arm_node", "--ros-args", "-p",
                                 f"port:={bus.port}", "-p", f"robot_id:={ROBOT_ID}", "-p",
                                 f"calibration_dir:={tmp_path}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            assert wait_for(lambda: all(bus.torques().values()), 60.0), "the node did not activate the arm"
            stopped = ctl("stop")
            assert stopped.returncode == 0 and stopped.stdout.strip(), stopped.stderr
            assert all(bus.torques().values())  # a stop freezes: torque stays on
            estopped = ctl("estop")
            assert estopped.returncode == 0, estopped.stderr
            assert wait_for(lambda: not any(bus.torques().values()), 5.0), "e-stop left torque on"
            reset = ctl("reset")
            assert reset.returncode == 0, reset.stderr
            assert wait_for(lambda: all(bus.torques().values()), 5.0), "reset did not bring torque back"
        finally:
            node.terminate()
            out, _ = node.communicate(timeout=30)
    assert "torque off and port closed" in out
    nobody = ctl("stop", "--namespace", "elsewhere", wait=1)
    assert nobody.returncode == 1
    assert "no service /elsewhere/act_so101/stop within 1 s: is the graph running" in nobody.stderr


def test_run_end_and_target_reach_the_policy_node(ros, tiny_checkpoint):
    from act_node.nodes.policy_node import PolicyNode

    node = PolicyNode(parameter_overrides=[Parameter("checkpoint", value=str(tiny_checkpoint))],
                      cli_args=["--ros-args", "-r", "__ns:=/ctl_run", "-r", "target/point:=/clicked_point"])
    ros.add_node(node)  # a namespace of its own: a node another test left in the domain is not counted
    try:
        assert node.episode_start_s is None  # no task: it waits for a run
        started = ctl("run", "pick up the box", "--namespace", "ctl_run")
        assert started.returncode == 0, started.stderr
        assert "run: pick up the box (1 subscriber)" in started.stdout
        assert wait_for(lambda: node.task == "pick up the box" and node.episode_start_s is not None)
        pointed = ctl("target", "0.4", "0.3", "--topic", "/clicked_point")
        assert pointed.returncode == 0, pointed.stderr
        assert wait_for(lambda: node.target is not None)
        assert np.allclose(node.target[1], [0.4, 0.3]) and node.target[0] > node.episode_start_s
        ended = ctl("end", "--namespace", "ctl_run")
        assert ended.returncode == 0 and "run ended" in ended.stdout, ended.stderr
        assert wait_for(lambda: node.episode_start_s is None)
        time.sleep(0.3)
    finally:
        retire(ros, node)


def test_record_start_stop_and_discard_reach_the_recorder(ros, tmp_path):
    from act_node.nodes.recorder_node import RecorderNode

    node = RecorderNode(parameter_overrides=[Parameter("root", value=str(tmp_path / "data")),
                                             Parameter("use_target", value=False),
                                             Parameter("task", value="stack the blocks")])  # the launch's task:=
    ros.add_node(node)
    try:
        started = ctl("record-start")
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == "recording: stack the blocks"
        stopped = ctl("record-stop")
        assert stopped.stdout.strip() or stopped.stderr.strip()  # the recorder's own answer, printed
        discarded = ctl("record-discard")  # nothing under way any more
        assert discarded.returncode == 1 and "no episode is being recorded" in discarded.stderr
    finally:
        retire(ros, node)


class Graph(Node):
    """What an arm graph publishes at 30 Hz: joint states (best effort), the applied command (reliable), a camera."""

    def __init__(self):
        super().__init__("fake_arm_graph")
        self.joints = self.create_publisher(JointState, "joint_states", SENSOR)
        self.commands = self.create_publisher(JointState, "act/joint_command", COMMANDS)
        self.image = self.create_publisher(Image, "camera/front/image_raw", SENSOR)
        self.ticks = 0
        self.create_timer(1 / 30, self.tick)

    def tick(self) -> None:
        stamp = time.time()
        q = np.full(6, 0.01 * self.ticks)
        self.joints.publish(messages.joint_state_message(q, np.zeros(6), stamp))
        self.commands.publish(messages.joint_state_message(q, np.zeros(6), stamp))
        self.image.publish(messages.image_message(np.full((48, 64, 3), 90, np.uint8), stamp, "front"))
        self.ticks += 1


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bag_records_the_graphs_topics_in_a_bag_bag2dataset_reads(ros, tmp_path, storage):
    from act_node.bags import messages as bag_messages
    from act_node.bags import topic_names

    graph = Graph()
    ros.add_node(graph)
    out = tmp_path / "bag"
    try:
        recorded = ctl("bag", str(out), "--cameras", "front", "--duration", "4", "--storage", storage)
    finally:
        retire(ros, graph)
    assert recorded.returncode == 0, recorded.stderr
    counts: dict[str, int] = {}
    for what, _, message in bag_messages(out, topic_names("", ("front",))):
        counts[what] = counts.get(what, 0) + 1
        if what == "joints":
            assert list(message.name) == list(so101.JOINT_NAMES)
    assert counts.get("joints", 0) > 30 and counts.get("command", 0) > 30 and counts.get("camera:front", 0) > 30, \
        (counts, recorded.stdout)
    assert "/joint_states" in recorded.stdout and "/act/joint_command" in recorded.stdout
    again = ctl("bag", str(out), "--duration", "1")
    assert again.returncode == 1 and "exists already" in again.stderr





def test_a_run_reaches_a_subscriber_discovered_after_the_first(ros):
    """`ctl run` publishes once the first subscriber matched, then stays until no new one has for a while: act/run
    has three (the policy, the selector, the scene reader), each discovered on its own, seconds apart on a busy
    machine, and a latched message reaches a late one only while its publisher lives."""
    from std_msgs.msg import String

    heard: dict[str, list[str]] = {"first": [], "later": []}
    first = Node("ctl_first", namespace="/ctl_late")
    first.create_subscription(String, "act/run", lambda m: heard["first"].append(m.data), messages.LATCHED)
    ros.add_node(first)
    later = None
    try:
        caller = subprocess.Popen([sys.executable, "-m", "act_node.cli", "ctl", "run", "pick up the key",
                                   "--namespace", "ctl_late", "--wait", "20"], stdout=subprocess.PIPE, text=True)
        assert wait_for(lambda: heard["first"] == ["pick up the key"], 60.0)
        time.sleep(0.5)  # a node that comes half a second later (the call used to have ended by then)
        later = Node("ctl_later", namespace="/ctl_late")  # discovered after the message went out
        later.create_subscription(String, "act/run", lambda m: heard["later"].append(m.data), messages.LATCHED)
        ros.add_node(later)
        out, _ = caller.communicate(timeout=60)
        assert caller.returncode == 0 and "(2 subscribers)" in out, out
        assert wait_for(lambda: heard["later"] == ["pick up the key"])
    finally:
        retire(ros, first)
        if later is not None:
            retire(ros, later)


def test_one_run_starts_at_one_instant_in_the_policy_the_reader_the_selector_and_the_recorder(ros, tiny_checkpoint,
                                                                                            tmp_path):
    """On the arm a run is one act/run, heard by four nodes at four moments: each starts it at the message's
    source timestamp, so the scene read after the reader's start is after the policy's too (with each node's own
    receipt time the policy could refuse the run's only target as older than its run and wait forever), and the
    recorder's episode holds the frames from the moment the run was sent."""
    from act_node.nodes.policy_node import PolicyNode
    from act_node.nodes.recorder_node import RecorderNode
    from act_node.nodes.scene_reader_node import SceneReaderNode
    from act_node.nodes.selector_node import SelectorNode

    space = ["--ros-args", "-r", "__ns:=/ctl_instant"]
    nodes = [PolicyNode(parameter_overrides=[Parameter("checkpoint", value=str(tiny_checkpoint))], cli_args=space),
             SceneReaderNode(cli_args=space), SelectorNode(cli_args=space),
             RecorderNode(parameter_overrides=[Parameter("root", value=str(tmp_path / "data")),
                                               Parameter("use_target", value=False)], cli_args=space)]
    policy, reader, selector, recorder = nodes
    for node in nodes:
        ros.add_node(node)
    try:
        sent = time.time()
        started = ctl("run", "pick up the box", "--namespace", "ctl_instant")
        assert started.returncode == 0 and "(4 subscribers)" in started.stdout, started.stdout + started.stderr
        assert wait_for(lambda: policy.episode_start_s is not None and reader.asked_s is not None
                        and selector.request == "box" and recorder.recorder.running is not None)
        assert policy.episode_start_s == reader.asked_s == selector.episode_s == recorder.recorder.running.start_s
        assert recorder.recorder.running.task == "pick up the box"
        assert sent < policy.episode_start_s < time.time()
    finally:
        for node in nodes:
            retire(ros, node)
