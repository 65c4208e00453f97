"""The arm node over rclpy against the simulated STS3215 bus: joint states, chunks, services, diagnostics,
refusing to start, and a shutdown that leaves every servo that answers without torque."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from arm_helpers import (
    ROBOT_ID,
    START_RAD,
    StreamingCamera,
    calibration,
    check_goal_writes,
    goal_writes,
    write_calibration,
)
from conftest import retire, wait_for
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from act_node.arm.servo_sim import SimulatedBus
from act_node.nodes import messages
from act_node.nodes.messages import RELIABLE, SENSOR


class Operator(Node):
    """What a policy node and an operator would do: send chunks, call services, watch joints and diagnostics."""

    def __init__(self):
        super().__init__("operator")
        self.chunks = self.create_publisher(JointTrajectory, "act/action_chunk", RELIABLE)
        self.joints: list[JointState] = []
        self.diagnostics: list[DiagnosticArray] = []
        self.create_subscription(JointState, "joint_states", self.joints.append, SENSOR)
        self.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, RELIABLE)
        self.triggers = {name: self.create_client(Trigger, f"/act_so101/{name}") for name in ("stop", "estop", "reset")}

    def call(self, name: str) -> Trigger.Response:
        client = self.triggers[name]
        assert client.wait_for_service(timeout_sec=5.0)
        future = client.call_async(Trigger.Request())
        assert wait_for(future.done), f"~/{name} did not answer"
        return future.result()

    def send(self, actions: np.ndarray, stamp_s: float, fps: float = 30.0) -> None:
        self.chunks.publish(messages.chunk_message(actions, stamp_s, fps))

    def values(self) -> dict[str, str]:
        return {kv.key: kv.value for kv in self.diagnostics[-1].status[0].values}


@pytest.fixture
def bus():
    with SimulatedBus(calibration(), start_rad=START_RAD) as sim:
        yield sim


def arm_node(bus, folder, **parameters):
    from act_node.nodes.arm_node import ArmNode

    values = {"port": bus.port, "robot_id": ROBOT_ID, "calibration_dir": str(folder), **parameters}
    return ArmNode(parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])


def test_node_drives_the_arm_from_chunks_and_accounts_for_each(ros, bus, tmp_path):
    write_calibration(tmp_path)
    node = arm_node(bus, tmp_path, rest_pose=list(START_RAD))
    operator = Operator()
    ros.add_node(node)
    ros.add_node(operator)
    try:
        assert wait_for(lambda: len(operator.joints) > 5 and operator.count_publishers("joint_states") == 1)
        np.testing.assert_allclose(operator.joints[-1].position, START_RAD, atol=0.01)
        stamp = messages.seconds_of(operator.joints[-1].header.stamp)
        assert abs(stamp - time.time()) < 0.5, "joint states are stamped on wall time at the read"
        target = START_RAD + np.array([0.3, -0.2, 0.2, 0.1, 0.4, 0.5])
        operator.send(np.repeat(target[None], 60, axis=0), time.time())
        bad = messages.chunk_message(np.repeat(target[None], 5, axis=0), time.time(), 30.0)
        bad.points[3].time_from_start = bad.points[1].time_from_start  # non-monotonic
        operator.chunks.publish(bad)
        nan = np.repeat(target[None], 5, axis=0)
        nan[2, 1] = np.nan
        operator.send(nan, time.time())
        assert wait_for(lambda: node.control.ledger.received == 3)
        assert wait_for(lambda: np.abs(bus.positions_rad() - target).max() < 0.05, 5.0)
        ledger = node.control.ledger
        assert ledger.applied == 1 and ledger.balanced
        assert any("not strictly increasing" in reason for reason in ledger.rejected)
        assert any("NaN" in reason for reason in ledger.rejected)
        assert wait_for(lambda: operator.diagnostics and operator.values().get("chunks_applied") == "1"
                        and "gripper.voltage_v" in operator.values(), 5.0)  # the servos' status is read too
        values = operator.values()
        assert values["state"] == "running" and "NaN" in values["chunks_rejected"]
        assert values["gripper.voltage_v"] == "12.1"
        check_goal_writes(bus, node.control.safety_config)

        assert operator.call("estop").success
        assert not any(bus.torques().values())
        count = len(goal_writes(bus))
        operator.send(np.repeat(START_RAD[None], 60, axis=0), time.time())
        assert wait_for(lambda: node.control.ledger.received == 4)
        time.sleep(0.3)
        assert len(goal_writes(bus)) == count, "nothing written while e-stopped"
        assert node.control.ledger.rejected["arm estopped"] == 1
        assert operator.call("reset").success and all(bus.torques().values())
        assert operator.call("stop").message == "stopped at the present pose"
        assert operator.call("reset").success  # running again: shutdown's rest move only runs from there
        # the bus loop runs on: a read counted a moment before its joint_states goes out is still one of each
        assert wait_for(lambda: node.published == node.control.stats.reads, 2.0), "one joint_states per completed read"
    finally:
        retire(ros, operator, node)  # destroy_node: rest move, torque off, port closed
    assert not any(bus.torques().values())
    np.testing.assert_allclose(bus.positions_rad(), START_RAD, atol=0.05)
    check_goal_writes(bus, node.control.safety_config)


def test_dry_run_node_never_torques_nor_writes(ros, bus, tmp_path):
    write_calibration(tmp_path)
    node = arm_node(bus, tmp_path, dry_run=True)
    operator = Operator()
    ros.add_node(node)
    ros.add_node(operator)
    try:
        assert wait_for(lambda: operator.count_publishers("act/action_chunk") == 1
                        and node.count_publishers("act/action_chunk") == 1)
        time.sleep(0.3)
        operator.send(np.repeat((START_RAD + 0.3)[None], 60, axis=0), time.time())
        assert wait_for(lambda: node.control.ledger.applied == 1)
        time.sleep(0.5)
        assert len(operator.joints) > 5
    finally:
        retire(ros, operator, node)
    assert goal_writes(bus) == []
    assert not [w for w in bus.writes if w.register == "Torque_Enable" and w.value == 1]


def _node_process(bus, folder, *parameters) -> subprocess.Popen:
    arguments = ["--ros-args", "-p", f"port:={bus.port}", "-p", f"robot_id:={ROBOT_ID}",
                 "-p", f"calibration_dir:={folder}", *parameters]
    return subprocess.Popen([sys.executable, "-m", "act_node.nodes.arm_node", *arguments], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_node_refuses_to_start_with_exit_code_2_listing_every_problem(bus, tmp_path):
    bus.fault(6, silent=True)  # and no calibration file
    process = _node_process(bus, tmp_path)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 2, out
    assert "does not exist" in out and "'gripper' (id 6) does not answer" in out


def test_sigterm_turns_torque_off_on_every_servo_that_answers(bus, tmp_path):
    write_calibration(tmp_path)
    process = _node_process(bus, tmp_path)
    try:
        assert wait_for(lambda: all(bus.torques().values()), 60.0), "the node did not activate the arm"
        time.sleep(1.0)  # into the bus loop (a SIGTERM during start-up is the next test's case)
        bus.fault(2, silent=True)  # one servo dies while running
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert [i for i, on in bus.torques().items() if on] == [2], out
    assert "no answer from ['shoulder_lift']" in out


def test_sigterm_during_start_up_leaves_no_servo_torqued(bus, tmp_path):
    write_calibration(tmp_path)
    process = _node_process(bus, tmp_path)
    try:
        assert wait_for(lambda: any(bus.torques().values()), 60.0), "the node did not activate the arm"
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert wait_for(lambda: not any(bus.torques().values()), 2.0), out


def test_launch_command_drives_the_arm_and_ctrl_c_leaves_it_without_torque(bus, tmp_path):
    """`act-sim launch robot:=so101 ...` (the graph ros2 launch also starts) against the simulated bus: the
    arm is activated, and Ctrl-C on the launch leaves every servo without torque, every goal in bounds."""
    from act_node.arm.safety import SafetyConfig

    write_calibration(tmp_path)
    command = [sys.executable, "-m", "act_node.cli", "launch", "robot:=so101", f"port:={bus.port}", f"id:={ROBOT_ID}",
               f"calibration_dir:={tmp_path}", "policy:=expert"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        torqued = wait_for(lambda: all(bus.torques().values()), 90.0)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert torqued, out
    assert "act_so101: torque off and port closed" in out, out
    assert "nodes that failed" not in out, out
    assert not any(bus.torques().values()), out
    check_goal_writes(bus, SafetyConfig())


# --- a camera node killed under the arm ----------------------------------------------------------------------
class ChunkWatcher(Node):
    """The policy's chunks as they arrive, the arm node's /diagnostics, and a target said again and again."""

    def __init__(self):
        super().__init__("chunk_watcher")
        self.chunks: list[float] = []  # arrival times
        self.arm: list[tuple[float, dict]] = []  # (arrival, the arm node's key-values)
        self.create_subscription(JointTrajectory, "act/action_chunk", lambda _m: self.chunks.append(time.monotonic()),
                                 RELIABLE)
        self.create_subscription(DiagnosticArray, "/diagnostics", self.on_diagnostics, RELIABLE)
        self.target = self.create_publisher(messages.PointStamped, "target/point", messages.LATCHED)
        # a target clicked before a run starts is not that run's: say it again and again, as a selector does
        self.create_timer(0.5, lambda: self.target.publish(messages.point_message((0.3, 0.0), time.time())))

    def on_diagnostics(self, message: DiagnosticArray) -> None:
        for status in message.status:
            if status.name.startswith("act_so101"):
                self.arm.append((time.monotonic(), {kv.key: kv.value for kv in status.values}))

    def applied(self, after: float = -np.inf) -> int:
        """The chunks the arm applied, as its newest report after `after` says (-1: no report yet)."""
        reports = [values for at, values in self.arm if at > after]
        return int(reports[-1]["chunks_applied"]) if reports else -1


def camera_node_pid(name: str, launcher: int) -> int | None:
    """The pid of the graph's live camera node `act_camera_<name>` (a child of act-sim launch)."""
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) != launcher:
                continue
            if f"__node:=act_camera_{name}".encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                return int(entry.name)
        except (OSError, ValueError):
            continue
    return None


def test_a_killed_camera_node_holds_the_arm_until_its_respawn_is_answered(ros, bus, tmp_path, tiny_checkpoint):
    """robot:=so101 with two camera nodes and a camera ACT, respawn:=true: the front camera node SIGKILLed
    while the policy drives the arm. The policy refuses the observations that lack its frames and says why, the
    arm holds on the stale chunk rule and says so once, the camera node comes back, and the arm follows chunks
    again; Ctrl-C then leaves no servo torqued."""
    from conftest import TINY_IMAGE

    write_calibration(tmp_path)
    cameras = {name: StreamingCamera(tmp_path / f"{name}.mjpg", TINY_IMAGE) for name in ("front", "wrist")}
    watcher = ChunkWatcher()
    ros.add_node(watcher)
    log_path = tmp_path / "launch.log"
    command = [sys.executable, "-m", "act_node.cli", "launch", "robot:=so101", f"port:={bus.port}", f"id:={ROBOT_ID}",
               f"calibration_dir:={tmp_path}", "policy:=act", f"checkpoint:={tiny_checkpoint}",
               f"camera_devices:={cameras['front'].path},{cameras['wrist'].path}", "task:=pick up the cup",
               "respawn:=true"]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    before = at_back = 0

    def said(text: str) -> bool:
        return text in log_path.read_text()[before:]

    try:
        assert wait_for(lambda: len(watcher.chunks) >= 3 and watcher.applied() > 0, 150.0), \
            log_path.read_text()[-3000:]
        victim = camera_node_pid("front", process.pid)
        assert victim is not None, log_path.read_text()[-3000:]
        before = len(log_path.read_text())  # the log from the kill on
        os.kill(victim, signal.SIGKILL)
        assert wait_for(lambda: said("no chunk: camera front silent"), 30.0), log_path.read_text()[-3000:]
        refused = time.monotonic()
        # the arm holds on the stale chunk rule while the camera is gone (its report, a second apart)
        assert wait_for(lambda: any(at > refused and v["hold_reason"] == "chunk stale" for at, v in watcher.arm),
                        30.0), watcher.arm[-3:]
        assert wait_for(lambda: said("respawning act_camera_front (respawn:=true)"), 30.0), log_path.read_text()[-3000:]
        assert wait_for(lambda: cameras["front"].readers >= 2, 60.0), "the respawned camera node never read"
        back, at_back = time.monotonic(), len(log_path.read_text())
        applied = watcher.applied()  # none since the frames stopped: the newest report before the camera came back
        # and a chunk answered from the respawned camera's frames drives the arm again
        assert wait_for(lambda: watcher.applied(after=back) > applied >= 0, 90.0), (applied, watcher.arm[-1:])
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for camera in cameras.values():
            camera.close()
        retire(ros, watcher)
    text = log_path.read_text()
    assert "node act_camera_front was killed by SIGKILL; respawning it in 1 s" in text
    # said once, not every tick: the arm's hold (if it began after the kill) and the policy's refusal
    assert text[before:at_back].count("holding the arm: chunk stale") <= 1, text[-3000:]
    assert text[before:at_back].count("no chunk: camera front silent") == 1, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert "act_so101: torque off and port closed" in text, text[-3000:]
    assert not any(bus.torques().values())
