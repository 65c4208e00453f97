"""The safety chain on its own (no bus, no ROS): filter order and bounds, the first goal, holds, latches,
stop / e-stop / reset, and the chunk ledger."""

from __future__ import annotations

import numpy as np
import pytest

from act_node import so101
from act_node.arm.interface import JointReading, ServoStatus
from act_node.arm.safety import ChunkLedger, SafetyChain, SafetyConfig

MEASURED = np.array([0.1, -0.6, 0.5, 0.9, -0.2, 0.3])


def chain(**options) -> SafetyChain:
    config = SafetyConfig(**options)
    calibrated = (so101.LOWER_RAD + 0.1, so101.UPPER_RAD - 0.2)
    c = SafetyChain(config, so101.LOWER_RAD, so101.UPPER_RAD, *calibrated, so101.JOINT_NAMES)
    c.start(MEASURED)
    return c


def test_range_is_joint_range_and_calibrated_range_less_margin():
    c = chain(margin_rad=0.05)
    np.testing.assert_allclose(c.lower, so101.LOWER_RAD + 0.15)
    np.testing.assert_allclose(c.upper, so101.UPPER_RAD - 0.25)
    with pytest.raises(ValueError, match="empty"):
        SafetyChain(SafetyConfig(margin_rad=2.0), so101.LOWER_RAD, so101.UPPER_RAD, so101.LOWER_RAD,
                    so101.UPPER_RAD, so101.JOINT_NAMES)


def test_first_goal_is_the_measured_pose_and_a_far_command_is_walked_in():
    c = chain()
    assert np.array_equal(c.last_goal, MEASURED)
    far = np.zeros(6)  # a command source that starts at zeros
    step = c.config.max_step_rad
    goal = c.filter(far, MEASURED).goal
    np.testing.assert_allclose(np.abs(goal - MEASURED), np.minimum(np.abs(MEASURED), step))
    assert c.clamps["velocity"] == 6  # every joint is more than one step from zero
    # the arm does not follow: the distance from the measured pose bounds the goal, however many ticks pass
    for _ in range(30):
        goal = c.filter(far, MEASURED).goal
    assert np.all(np.abs(goal - MEASURED) <= c.config.max_from_measured_rad + 1e-12)
    assert c.clamps["from_measured"] > 0


def test_range_clamp_comes_before_the_velocity_bound():
    c = chain()
    wanted = MEASURED.copy()
    wanted[0] = 10.0
    decision = c.filter(wanted, MEASURED)
    assert decision.clamped["range"] == 1
    assert decision.goal[0] == pytest.approx(MEASURED[0] + c.config.max_step_rad)


def test_non_finite_and_held_commands_write_nothing():
    c = chain()
    assert c.filter(np.full(6, np.nan), MEASURED).goal is None
    assert c.filter(np.array([0, 0, np.inf, 0, 0, 0.0]), MEASURED).goal is None
    decision = c.filter(MEASURED, MEASURED, held_reason="chunk stale")
    assert decision.goal is None and decision.reason == "chunk stale"
    assert c.holds["chunk stale"] == 1
    assert np.array_equal(c.last_goal, MEASURED)


def test_failed_reads_latch_after_n_in_a_row():
    c = chain(max_failed_reads=3)
    c.on_read_failed("timeout")
    c.on_read_failed("timeout")
    c.on_read(JointReading(MEASURED, 0.0), 0.0)  # a good read resets the count
    c.on_read_failed("timeout")
    c.on_read_failed("timeout")
    assert c.writing
    c.on_read_failed("no status packet")
    assert c.state == "fault" and "3 reads failed in a row" in c.faults[0]
    assert c.filter(MEASURED, MEASURED).goal is None


def test_tracking_error_latches_only_when_it_lasts():
    c = chain(max_tracking_error_rad=0.2, tracking_time_s=0.5)
    off = MEASURED + np.array([0, 0, 0.3, 0, 0, 0])  # the arm is 0.3 rad from the goal on elbow_flex
    c.on_read(JointReading(off, 0.0), 0.0)
    c.on_read(JointReading(off, 0.4), 0.4)
    c.on_read(JointReading(MEASURED, 0.45), 0.45)  # it caught up: the clock restarts
    c.on_read(JointReading(off, 0.5), 0.5)
    c.on_read(JointReading(off, 0.9), 0.9)
    assert c.writing
    c.on_read(JointReading(off, 1.01), 1.01)
    assert c.state == "fault" and "'elbow_flex'" in c.faults[0]


def test_servo_flags_and_out_of_range_positions_latch():
    c = chain()
    c.on_status([ServoStatus("shoulder_pan", True), ServoStatus("gripper", True, 0x04)])
    assert c.state == "fault" and "gripper: overheat" in c.faults[0]
    c = chain()
    c.on_read(JointReading(MEASURED, 0.0, None, ("wrist_flex",)), 0.0)
    assert c.state == "fault" and "wrist_flex" in c.faults[0]


def test_stop_estop_and_reset():
    c = chain()
    moved = MEASURED + 0.01
    assert np.array_equal(c.stop(moved), moved)
    assert c.filter(MEASURED, MEASURED).goal is None
    c.estop()
    c.latch("a fault while e-stopped")
    assert c.state == "estopped"  # an e-stop is not downgraded by a later fault
    c.reset(moved)
    assert c.writing and c.faults == []
    assert np.array_equal(c.filter(moved, moved).goal, moved)


def test_config_is_validated():
    with pytest.raises(ValueError, match="max_velocity_rad_s must be a positive number, got nan"):
        SafetyConfig(max_velocity_rad_s=float("nan"))
    with pytest.raises(ValueError, match="max_failed_reads"):
        SafetyConfig(max_failed_reads=0)


def test_ledger_balances():
    ledger = ChunkLedger()
    for _ in range(3):
        ledger.receive()
    ledger.apply()
    ledger.reject("chunk holds NaN or inf")
    assert not ledger.balanced
    ledger.reject("arm estopped")
    assert ledger.balanced
