"""The SO-101 leader arm against the simulated STS3215 bus standing in for it: LeRobot's SO101Leader reads it in
radians with torque off, names what is wrong when it cannot, and the leader node publishes leader/joint_states
that track the servos as a hand moves them, through a servo going silent and coming back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from arm_helpers import START_RAD
from conftest import retire, wait_for
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from act_node import so101
from act_node.arm.calibration import MOTOR_IDS, Calibration, MotorCalibration, so101_calibration
from act_node.arm.interface import ArmConfigurationError, ArmReadError, JointReading
from act_node.arm.leader import SO101LeaderArm
from act_node.arm.servo_sim import SimulatedBus
from act_node.nodes.messages import RELIABLE, SENSOR, seconds_of

LEADER_ID = "sim_leader"
# a leader's homing offsets differ from the follower's (tests/arm_helpers.py): each arm is calibrated on its own
HOMING = {"shoulder_pan": 300, "shoulder_lift": -845, "elbow_flex": 612, "wrist_flex": -77, "wrist_roll": 0,
          "gripper": -1210}
TRACKING_RAD = 0.005  # a read against the servos: a few ticks (1 tick = 0.0015 rad) of quantisation


def calibration() -> Calibration:
    return so101_calibration(HOMING)


def write_calibration(folder, cal: Calibration | None = None):
    path = folder / f"{LEADER_ID}.json"
    (cal or calibration()).save(path)
    return path


@pytest.fixture
def bus():
    with SimulatedBus(calibration(), start_rad=START_RAD) as sim:
        yield sim


def move_by_hand(bus: SimulatedBus, q: np.ndarray) -> None:
    """Put the leader's joints at `q` (6,) radians, as a hand would (torque off: the servos do not resist), and
    wait until every servo's Present_Position says so."""
    with bus.physics_lock:
        bus.physics.q = np.asarray(q, float).copy()
    ticks = bus.calibration.from_radians(q) % 4096
    assert wait_for(lambda: all(bus.register(MOTOR_IDS[name], "Present_Position") == t
                                for name, t in zip(so101.JOINT_NAMES, ticks)), 5.0)


def torque_enabled_writes(bus: SimulatedBus) -> list:
    return [w for w in bus.writes if w.register == "Torque_Enable" and w.value != 0]


# --- the leader arm without ROS ----------------------------------------------------------------------------
def test_leader_reads_radians_and_turns_torque_off(bus, tmp_path):
    write_calibration(tmp_path)
    bus.set_register(MOTOR_IDS["elbow_flex"], "Torque_Enable", 1)  # left torqued by another program
    leader = SO101LeaderArm(bus.port, LEADER_ID, tmp_path)
    leader.connect()
    try:
        assert not any(bus.torques().values()), "a leader is moved by hand: torque off on every servo"
        reading = leader.read()
        np.testing.assert_allclose(reading.positions, START_RAD, atol=TRACKING_RAD)
        target = START_RAD + np.array([-0.4, 0.3, -0.5, 0.2, 1.1, 0.6])
        move_by_hand(bus, target)
        later = leader.read()
        np.testing.assert_allclose(later.positions, target, atol=TRACKING_RAD)
        assert later.stamp_s > reading.stamp_s
    finally:
        leader.close()
    assert not torque_enabled_writes(bus) and not bus.goal_writes()


def test_a_failed_read_raises_naming_the_silent_servo_and_close_survives_it(bus, tmp_path):
    write_calibration(tmp_path)
    leader = SO101LeaderArm(bus.port, LEADER_ID, tmp_path)
    leader.connect()
    bus.fault(MOTOR_IDS["wrist_flex"], silent=True)
    with pytest.raises(ArmReadError, match=r"no answer from \['wrist_flex \(id 4\)'\]"):
        leader.read()
    bus.fault(MOTOR_IDS["wrist_flex"], silent=False)
    np.testing.assert_allclose(leader.read().positions, START_RAD, atol=TRACKING_RAD)
    bus.fault(MOTOR_IDS["wrist_flex"], silent=True)
    leader.close()  # must not raise past the dead servo
    assert not leader.is_connected
    with pytest.raises(ArmReadError, match=f"the leader on {bus.port} is not connected"):
        leader.read()


def test_the_calibration_file_is_where_lerobot_calibrate_writes_a_leaders():
    from lerobot.utils.constants import HF_LEROBOT_CALIBRATION

    expected = HF_LEROBOT_CALIBRATION / "teleoperators" / "so_leader" / "leader.json"
    assert SO101LeaderArm("/dev/ttyACM1").calibration_path == expected
    assert SO101LeaderArm("/dev/ttyACM1", "left", "~/cal").calibration_path == Path("~/cal/left.json").expanduser()


def test_connect_refuses_naming_what_is_wrong(bus, tmp_path):
    missing = SO101LeaderArm(bus.port, LEADER_ID, tmp_path)
    with pytest.raises(ArmConfigurationError, match=f"{tmp_path / LEADER_ID}.json does not exist"):
        missing.connect()

    moved = dict(calibration().motors)
    moved["shoulder_lift"] = MotorCalibration(**{**vars(moved["shoulder_lift"]), "homing_offset": 123})
    write_calibration(tmp_path, Calibration(moved))
    bus.fault(MOTOR_IDS["gripper"], silent=True)
    with pytest.raises(ArmConfigurationError) as refused:
        SO101LeaderArm(bus.port, LEADER_ID, tmp_path).connect()
    text = str(refused.value)
    assert "register Homing_Offset = -845" in text and "says homing_offset = 123" in text
    assert "'gripper' (id 6) does not answer" in text

    with pytest.raises(ArmConfigurationError, match="cannot open port /dev/no-such-port"):
        SO101LeaderArm("/dev/no-such-port", LEADER_ID, tmp_path).connect()
    with pytest.raises(ArmConfigurationError, match="'range_m100_100' units"):
        SO101LeaderArm(bus.port, LEADER_ID, tmp_path, units="range_m100_100").connect()
    assert not torque_enabled_writes(bus)


# --- the node ------------------------------------------------------------------------------------------------
class Follower(Node):
    """What a follower and a monitor see: leader/joint_states and /diagnostics."""

    def __init__(self):
        super().__init__("follower")
        self.joints: list[JointState] = []
        self.diagnostics: list[DiagnosticArray] = []
        self.create_subscription(JointState, "leader/joint_states", self.joints.append, SENSOR)
        self.create_subscription(DiagnosticArray, "/diagnostics", self.on_diagnostics, RELIABLE)

    def on_diagnostics(self, message: DiagnosticArray) -> None:
        if message.status and message.status[0].name.startswith("act_leader"):
            self.diagnostics.append(message)

    def values(self) -> dict[str, str]:
        return {kv.key: kv.value for kv in self.diagnostics[-1].status[0].values} if self.diagnostics else {}

    def newest_after(self, count: int) -> JointState:
        """The newest message once `count` more have arrived: read after whatever happened before the call."""
        start = len(self.joints)
        assert wait_for(lambda: len(self.joints) >= start + count), f"fewer than {count} messages arrived"
        return self.joints[-1]


def check_velocities(messages: list[JointState], fps: float) -> None:
    """Each message's velocities are its move from the message before over their stamps' interval (checked
    where none was lost between them); some are not zero."""
    checked = moving = 0
    for before, after in zip(messages, messages[1:]):
        dt = seconds_of(after.header.stamp) - seconds_of(before.header.stamp)
        if 0 < dt < 1.5 / fps:
            expected = (np.array(after.position) - np.array(before.position)) / dt
            np.testing.assert_allclose(after.velocity, expected, rtol=1e-6, atol=1e-6)
            checked += 1
            moving += bool(np.abs(expected).max() > 1.0)
    assert checked > 10 and moving > 0, f"{checked} pairs of messages checked, {moving} moving"


def leader_node(bus, folder, **parameters):
    from act_node.nodes.leader_node import LeaderNode

    values = {"port": bus.port, "robot_id": LEADER_ID, "calibration_dir": str(folder), **parameters}
    return LeaderNode(parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])


def test_node_publishes_joint_states_that_track_the_hand_through_a_silent_servo(ros, bus, tmp_path):
    write_calibration(tmp_path)
    node = leader_node(bus, tmp_path)
    follower = Follower()
    ros.add_node(node)
    ros.add_node(follower)
    try:
        first = follower.newest_after(3)
        assert tuple(first.name) == so101.JOINT_NAMES
        np.testing.assert_allclose(first.position, START_RAD, atol=TRACKING_RAD)
        for phase in np.linspace(0.0, 2 * np.pi, 8):  # a hand sweeping every joint
            q = START_RAD + 0.5 * np.sin(phase + np.arange(6))
            move_by_hand(bus, q)
            message = follower.newest_after(2)
            np.testing.assert_allclose(message.position, q, atol=TRACKING_RAD)
        check_velocities(follower.joints, node.fps)

        bus.fault(MOTOR_IDS["elbow_flex"], silent=True)
        assert wait_for(lambda: node.stats.read_failures >= 1)
        silent_from, received = node.stats.reads, len(follower.joints)
        failures = node.stats.read_failures
        assert wait_for(lambda: node.stats.read_failures >= failures + 3)
        assert node.stats.reads == silent_from and len(follower.joints) == received, "nothing while silent"
        assert wait_for(lambda: follower.values().get("failures_in_a_row", "0") != "0", 3.0)
        assert "elbow_flex (id 3)" in follower.values()["last_error"]
        assert follower.diagnostics[-1].status[0].level == DiagnosticStatus.ERROR

        q = START_RAD + np.array([0.2, -0.2, 0.3, -0.3, 0.4, 0.1])
        move_by_hand(bus, q)
        bus.fault(MOTOR_IDS["elbow_flex"], silent=False)
        np.testing.assert_allclose(follower.newest_after(3).position, q, atol=TRACKING_RAD)
        assert wait_for(lambda: follower.values().get("failures_in_a_row") == "0"
                        and float(follower.values()["rate_hz"]) > 0, 3.0)
    finally:
        retire(ros, follower, node)
    assert not node.leader.is_connected, "shutdown closes the port"
    assert not torque_enabled_writes(bus) and not bus.goal_writes(), "a leader never torques nor writes goals"


class FlakyDriver:
    """A leader whose driver raises what no one expected (the Feetech SDK indexing a reply cut short)."""

    port = "flaky"

    def __init__(self, raises: int):
        self.raises = raises
        self.closed = False

    def connect(self) -> None:
        pass

    def read(self) -> JointReading:
        if self.raises > 0:
            self.raises -= 1
            raise IndexError("list index out of range")
        return JointReading(START_RAD.copy(), time.time())

    def close(self) -> None:
        self.closed = True


def test_node_outlives_an_unexpected_driver_error(ros):
    from act_node.nodes.leader_node import LeaderNode

    driver = FlakyDriver(raises=3)
    node = LeaderNode(leader=driver)
    follower = Follower()
    ros.add_node(node)
    ros.add_node(follower)
    try:
        np.testing.assert_allclose(follower.newest_after(3).position, START_RAD)
        assert node.stats.read_failures == 3 and "IndexError" in node.stats.last_error
    finally:
        retire(ros, follower, node)
    assert driver.closed


def test_node_refuses_an_empty_port(ros):
    from act_node.nodes.leader_node import LeaderNode

    with pytest.raises(ValueError, match="parameter 'port' is empty"):
        LeaderNode(parameter_overrides=[Parameter("port", value="")])


def test_node_refuses_a_bad_calibration_with_exit_code_2_naming_the_file(bus, tmp_path):
    path = tmp_path / f"{LEADER_ID}.json"
    path.write_text('{"shoulder_pan": {"id": 1}}')
    arguments = ["--ros-args", "-p", f"port:={bus.port}", "-p", f"robot_id:={LEADER_ID}",
                 "-p", f"calibration_dir:={tmp_path}"]
    process = subprocess.run([sys.executable, "-m", "act_node.nodes.leader_node", *arguments], capture_output=True,
                             text=True, timeout=60, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = process.stdout + process.stderr
    assert process.returncode == 2, out
    assert f"calibration file {path} lacks motors" in out, out
    assert not torque_enabled_writes(bus)


# --- teleoperation: command_source:=leader, through the same executor and safety chain as chunks ----------------
def follow(follower_positions, q: np.ndarray, bound: float, seconds: float = 5.0) -> bool:
    return wait_for(lambda: np.abs(follower_positions() - q).max() < bound, seconds)


def test_a_leader_drives_the_follower_arm_node_and_a_silent_leader_holds_it(ros, bus, tmp_path):
    from arm_helpers import ROBOT_ID
    from arm_helpers import calibration as follower_calibration
    from arm_helpers import write_calibration as write_follower_calibration

    from act_node.nodes.arm_node import ArmNode

    write_calibration(tmp_path)
    write_follower_calibration(tmp_path)
    with SimulatedBus(follower_calibration(), start_rad=START_RAD) as arm_bus:
        leader = leader_node(bus, tmp_path)
        arm = ArmNode(parameter_overrides=[Parameter("port", value=arm_bus.port),
                                           Parameter("robot_id", value=ROBOT_ID),
                                           Parameter("calibration_dir", value=str(tmp_path)),
                                           Parameter("command_source", value="leader")])
        ros.add_node(leader)
        ros.add_node(arm)
        try:
            for offset in (0.15, -0.15, 0.3):  # a hand moving the leader; the follower goes where it is
                q = START_RAD + offset * np.array([1, -1, 1, -1, 1, 0.5])
                move_by_hand(bus, q)
                assert follow(arm_bus.positions_rad, q, 0.03), (arm_bus.positions_rad(), q)
            bus.fault(MOTOR_IDS["shoulder_pan"], silent=True)  # the leader goes silent ...
            assert wait_for(lambda: leader.stats.read_failures >= 3)
            move_by_hand_silently(bus, START_RAD)  # ... while the hand moves on, 0.3 rad away
            time.sleep(1.0)
            assert np.abs(arm_bus.positions_rad() - q).max() < 0.03, "a silent leader holds the follower"
            assert arm.control.ledger.rejected == {} or all("past" not in r for r in arm.control.ledger.rejected)
        finally:
            retire(ros, arm, leader)
        check_follower_goals(arm_bus)


def move_by_hand_silently(bus: SimulatedBus, q: np.ndarray) -> None:
    """Move the leader's joints while one servo is silent (its Present_Position cannot be awaited)."""
    with bus.physics_lock:
        bus.physics.q = np.asarray(q, float).copy()


def check_follower_goals(arm_bus: SimulatedBus) -> None:
    """Every goal the follower got stayed within its safety chain's bound of the measured position."""
    from arm_helpers import check_goal_writes

    from act_node.arm.safety import SafetyConfig

    assert check_goal_writes(arm_bus, SafetyConfig()) > 10


def test_a_leader_drives_the_simulated_so101_in_the_sim_node(ros, bus, tmp_path):
    from conftest import THREADED_RENDERER

    from act_node.nodes.sim_node import SimNode

    write_calibration(tmp_path)
    with pytest.raises(ValueError, match="needs clock:=realtime"):
        SimNode(parameter_overrides=[Parameter("command_source", value="leader")])
    sim = SimNode(parameter_overrides=[Parameter("renderer", value=THREADED_RENDERER),
                                       Parameter("clock", value="realtime"),
                                       Parameter("command_source", value="leader"),
                                       Parameter("image_height", value=48), Parameter("image_width", value=64),
                                       Parameter("objects", value=2), Parameter("max_steps", value=100000),
                                       Parameter("record_video", value=False)])
    ros.add_node(sim)
    time.sleep(1.5)
    waited = not sim.sim.running  # no episode runs out while the leader's node is still starting
    leader = leader_node(bus, tmp_path)
    ros.add_node(leader)
    try:
        assert waited, "the sim started its first episode before it heard the leader"
        assert wait_for(lambda: sim.sim.running, 10.0), "the sim never started once the leader was heard"
        q = START_RAD + np.array([0.2, 0.1, -0.1, 0.2, 0.3, 0.0])
        move_by_hand(bus, q)
        reached = wait_for(lambda: np.abs(sim.sim.joint_state()[0][:5] - q[:5]).max() < 0.05, 8.0)
        assert reached, (sim.sim.joint_state()[0], q)
    finally:
        retire(ros, leader, sim)
