"""The simulated STS3215 bus and the real driver stack on it: LeRobot's FeetechMotorsBus over a pty, the
calibration file, and the arm's lifecycle (configure refuses with every problem, activate seeds goal = present
before torque, deactivate turns torque off on every servo that answers)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from arm_helpers import HOMING, ROBOT_ID, START_RAD, calibration, follower, write_calibration

from act_node import so101
from act_node.arm.calibration import Calibration, CalibrationError, MotorCalibration
from act_node.arm.interface import ArmConfigurationError
from act_node.arm.servo_sim import (
    ERROR_OVERLOAD,
    REGISTERS,
    SimulatedBus,
    checksum,
    decode_sign,
    encode_sign,
)


@pytest.fixture
def bus():
    with SimulatedBus(calibration(), start_rad=START_RAD) as sim:
        yield sim


def test_register_addresses_are_lerobots():
    from lerobot.motors.feetech.tables import STS_SMS_SERIES_CONTROL_TABLE

    for name, address in REGISTERS.items():
        assert STS_SMS_SERIES_CONTROL_TABLE[name] == address, name


def test_sign_magnitude_and_checksum():
    assert decode_sign(encode_sign(-300, 11), 11) == -300
    assert encode_sign(-1, 15) == 0x8001
    # a status packet from servo 1 with no error and no parameters: FF FF 01 02 00 FC
    assert checksum([0x01, 0x02, 0x00]) == 0xFC


def test_calibration_file_round_trips_in_lerobots_format(tmp_path):
    import draccus
    from lerobot.motors import MotorCalibration as LeRobotCalibration

    path = write_calibration(tmp_path)
    with open(path) as handle:  # what LeRobot's Robot._load_calibration does
        theirs = draccus.load(dict[str, LeRobotCalibration], handle)
    assert {name: vars(c) for name, c in theirs.items()} == {n: vars(c) for n, c in calibration().motors.items()}
    assert Calibration.load(path) == calibration()


def test_conversion_matches_lerobots_bus():
    from lerobot.motors import Motor, MotorNormMode
    from lerobot.motors import MotorCalibration as LeRobotCalibration
    from lerobot.motors.feetech import FeetechMotorsBus

    cal = calibration()
    motors = {name: Motor(m.id, "sts3215", MotorNormMode.RANGE_0_100 if name == "gripper" else MotorNormMode.DEGREES)
              for name, m in cal.motors.items()}
    theirs = FeetechMotorsBus("/dev/null", motors, {n: LeRobotCalibration(**vars(m)) for n, m in cal.motors.items()})
    ticks = np.array([1500, 2047, 2600, 1000, 3900, 2300])
    expected = theirs._normalize({m.id: int(t) for m, t in zip(cal.motors.values(), ticks)})
    np.testing.assert_allclose(cal.lerobot_units(ticks), list(expected.values()), atol=1e-9)
    back = theirs._unnormalize(dict(zip(expected, cal.lerobot_units(ticks))))
    np.testing.assert_allclose(cal.ticks(cal.lerobot_units(ticks)), list(back.values()), atol=1)
    radians = np.array([0.3, -1.0, 1.2, -0.4, 2.0, 1.0])
    np.testing.assert_allclose(cal.to_radians(cal.from_radians(radians)), radians, atol=2 / 651)


def test_calibration_file_problems_are_named(tmp_path):
    with pytest.raises(CalibrationError, match="does not exist"):
        Calibration.load(tmp_path / "none.json")
    broken = dict(calibration().motors)
    broken["elbow_flex"] = MotorCalibration(3, 0, 0, 3000, 1000)
    Calibration(broken).save(tmp_path / "bad.json")
    with pytest.raises(CalibrationError, match="elbow_flex.*range_min 3000 >= range_max 1000"):
        Calibration.load(tmp_path / "bad.json")


def test_lerobot_reads_the_simulated_arm_in_degrees(bus, tmp_path):
    """LeRobot's own SOFollower (so101_follower, use_degrees) connects to the pty and reads the pose."""
    from lerobot.robots.so_follower import SOFollower, SOFollowerRobotConfig

    write_calibration(tmp_path)
    robot = SOFollower(SOFollowerRobotConfig(port=bus.port, id=ROBOT_ID, calibration_dir=tmp_path, use_degrees=True))
    robot.bus.connect()  # LeRobot's handshake: pings every ID and compares firmware versions
    try:
        assert robot.bus.is_calibrated
        observation = robot.get_observation()
        values = np.array([observation[f"{name}.pos"] for name in so101.JOINT_NAMES])
        np.testing.assert_allclose(so101.from_lerobot(values), START_RAD, atol=0.005)
        assert robot.bus.read("Homing_Offset", "elbow_flex", normalize=False) == HOMING["elbow_flex"]
    finally:
        robot.bus.disconnect(disable_torque=True)


def test_configure_then_activate_seeds_goals_before_torque(bus, tmp_path):
    """A stale goal left in the registers must never be driven to: every goal is written = present (and
    acknowledged) before the first Torque_Enable = 1."""
    write_calibration(tmp_path)
    stale = bus.register(3, "Present_Position") + 900
    bus.set_register(3, "Goal_Position", stale)
    arm = follower(bus, tmp_path)
    arm.configure()
    assert not any(bus.torques().values()), "configure must leave torque off"
    seeded = arm.activate()
    np.testing.assert_allclose(seeded, START_RAD, atol=0.005)
    torque_on = [w for w in bus.writes if w.register == "Torque_Enable" and w.value == 1]
    assert {w.servo_id for w in torque_on} == set(range(1, 7))
    first_on = min(w.time_s for w in torque_on)
    seeds = {w.servo_id: w for w in bus.goal_writes() if w.time_s < first_on}
    assert set(seeds) == set(range(1, 7)), "every servo's goal is seeded before torque"
    assert all(abs(w.value - w.present_ticks) <= 1 for w in seeds.values())
    time.sleep(0.3)
    np.testing.assert_allclose(bus.positions_rad(), START_RAD, atol=0.01)  # nothing jumped
    assert arm.deactivate() == []
    assert not any(bus.torques().values())


def test_configure_refuses_listing_every_problem(bus, tmp_path):
    """A silent ID, registers that disagree with the file and a checkpoint in -100..100 units, all at once."""
    different = dict(calibration().motors)
    m = different["wrist_flex"]
    different["wrist_flex"] = MotorCalibration(m.id, 0, m.homing_offset + 40, m.range_min, m.range_max - 10)
    write_calibration(tmp_path, Calibration(different))
    bus.fault(2, silent=True)
    arm = follower(bus, tmp_path, checkpoint_units="range_m100_100")
    with pytest.raises(ArmConfigurationError) as refused:
        arm.configure()
    text = "\n".join(refused.value.problems)
    assert "'shoulder_lift' (id 2) does not answer" in text
    assert "'wrist_flex': register Homing_Offset = 95" in text and "homing_offset = 135" in text
    assert "'wrist_flex': register Max_Position_Limit" in text
    assert "-100..100" in text
    assert "disagree with" in text and "then ENTER writes the file's values to the servos" in text  # said once
    assert len(refused.value.problems) == 5
    assert not any(bus.torques().values())
    assert not [w for w in bus.writes if w.register in ("Torque_Enable", "Goal_Position")]


def test_configure_refuses_without_a_calibration_file(bus, tmp_path):
    with pytest.raises(ArmConfigurationError, match="does not exist"):
        follower(bus, tmp_path).configure()


def test_configure_refuses_a_servo_reporting_errors(bus, tmp_path):
    write_calibration(tmp_path)
    bus.fault(5, error_bits=ERROR_OVERLOAD)
    with pytest.raises(ArmConfigurationError, match="'wrist_roll' \\(id 5\\) reports \\['overload'\\]"):
        follower(bus, tmp_path).configure()


def test_deactivate_turns_torque_off_on_every_servo_that_answers(bus, tmp_path):
    """LeRobot's disconnect() stops at the first servo that does not answer; deactivate() goes on."""
    write_calibration(tmp_path)
    arm = follower(bus, tmp_path)
    arm.configure()
    arm.activate()
    assert all(bus.torques().values())
    bus.fault(2, silent=True)
    assert arm.deactivate() == ["shoulder_lift"]
    torques = bus.torques()
    assert [i for i, on in torques.items() if on] == [2], "only the dead servo keeps its torque"
    assert not arm.bus.is_connected


def test_status_keeps_the_error_byte_that_sync_read_drops(bus, tmp_path):
    write_calibration(tmp_path)
    arm = follower(bus, tmp_path)
    arm.configure()
    bus.fault(4, error_bits=ERROR_OVERLOAD)
    arm.read()  # LeRobot's sync read succeeds and says nothing
    statuses = {s.name: s for s in arm.status()}
    assert statuses["wrist_flex"].flags == ["overload"]
    assert statuses["shoulder_pan"].error_bits == 0 and statuses["shoulder_pan"].voltage_v == pytest.approx(12.1)
    assert statuses["shoulder_pan"].temperature_c == 31
    arm.deactivate()
