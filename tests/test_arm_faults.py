"""The arm's control loop through the real driver stack (ArmController -> SO101FollowerArm -> LeRobot's
FeetechMotorsBus -> pty -> simulated STS3215s), at the real tick rate, with faults injected. After each run
every Goal_Position write the bus logged is checked: within the raw limits, within the per-tick velocity
bound, within the bound from the present position; none after an e-stop or a latched fault; and the chunk
ledger balances."""

from __future__ import annotations

import time

import numpy as np
import pytest
from arm_helpers import (
    START_RAD,
    calibration,
    check_goal_writes,
    controller,
    follower,
    goal_writes,
    run_ticks,
    write_calibration,
)

from act_node.arm.interface import ArmReadError
from act_node.arm.safety import SafetyConfig
from act_node.arm.servo_sim import ERROR_OVERHEAT, SimulatedBus

FPS = 30.0


@pytest.fixture
def bus():
    with SimulatedBus(calibration(), start_rad=START_RAD) as sim:
        yield sim


@pytest.fixture
def folder(tmp_path):
    write_calibration(tmp_path)
    return tmp_path


def ramp(start: np.ndarray, end: np.ndarray, steps: int = 60) -> np.ndarray:
    return start + (end - start) * np.linspace(0, 1, steps)[:, None]


def wait_until(condition, seconds: float = 10.0) -> bool:
    """Poll `condition` until it holds (True) or `seconds` pass (False): for what the simulated bus does in its
    own threads, which a loaded machine delays by an unknown amount."""
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def run_ticks_until(control, done, max_seconds: float, on_tick=None) -> list:
    """arm_helpers.run_ticks, ending after the first tick at which `done()` holds: a fault the test waits for
    may take more ticks on a loaded machine (a tick whose read failed skips its status read)."""
    results = []
    start = time.time()
    for k in range(int(round(max_seconds * control.fps))):
        time.sleep(max(0.0, start + k / control.fps - time.time()))
        now = time.time()
        if on_tick is not None:
            on_tick(k, now)
        results.append(control.tick(now))
        if done():
            break
    return results


def bus_barrier(arm) -> None:
    """Return once the simulated servos have taken everything the arm sent before: the bus answers requests in
    order, so a read that answered was asked after them (a sync write has no reply to wait for)."""
    for _ in range(100):
        try:
            arm.read()
            return
        except ArmReadError:
            pass
    raise AssertionError("the simulated bus answered none of 100 reads")


def test_a_chunk_far_from_the_arm_moves_it_within_every_bound(bus, folder):
    control = controller(bus, folder)
    measured = control.start()
    target = np.array([-0.5, 0.4, -0.3, 0.0, 0.6, 1.2])  # every joint far away
    now = time.time()
    assert control.add_chunk(now, np.repeat(target[None], 100, axis=0), now) == ""
    run_ticks(control, 1.5)
    assert check_goal_writes(bus, control.safety_config) > 6 * 15
    first = [w for w in goal_writes(bus) if w.sync][:6]  # the loop's first goal: a velocity step from measured
    step_ticks = control.safety_config.max_step_rad * 651.7
    assert all(abs(w.value - w.present_ticks) <= step_ticks + 3 for w in first)
    moved = bus.positions_rad()
    assert np.all(np.abs(moved - measured) > 0.2), "the arm walked towards the target"
    assert control.stats.executor_clamps > 0  # the executor bounds the velocity first; the chain again
    assert control.ledger.applied == 1 and control.ledger.balanced
    control.shutdown()


def test_a_command_source_starting_at_zeros_does_not_jump(bus, folder):
    control = controller(bus, folder)
    control.start()
    now = time.time()
    control.add_chunk(now, np.zeros((100, 6)), now)
    run_ticks(control, 0.5)
    check_goal_writes(bus, control.safety_config)
    assert np.all(np.abs(bus.positions_rad() - START_RAD) <= 0.5 * control.safety_config.max_velocity_rad_s + 0.02)
    control.shutdown()


def test_bad_chunks_are_rejected_with_reasons_and_nothing_moves(bus, folder):
    control = controller(bus, folder)
    control.start()
    now = time.time()
    nan_chunk = np.repeat(START_RAD[None], 10, axis=0)
    nan_chunk[4, 2] = np.nan
    assert control.add_chunk(now, nan_chunk, now) == "chunk holds NaN or inf"
    assert "inf" in control.add_chunk(now, np.full((10, 6), np.inf), now)
    assert "shape" in control.add_chunk(now, np.zeros((10, 5)), now)
    assert "every step is past" in control.add_chunk(now - 10.0, np.zeros((10, 6)), now)
    # a message the node refused (non-monotonic time_from_start) is counted too
    control.add_chunk(now, None, now, problem="chunk's time_from_start is not strictly increasing")
    run_ticks(control, 0.3)
    assert [w for w in goal_writes(bus) if w.sync] == []
    assert control.ledger.received == 5 and control.ledger.applied == 0 and control.ledger.balanced
    np.testing.assert_allclose(bus.positions_rad(), START_RAD, atol=0.01)
    control.shutdown()


def test_a_stale_chunk_holds(bus, folder):
    control = controller(bus, folder, stale_after_s=0.3)
    control.start()
    now = time.time()
    target = START_RAD + 0.3
    control.add_chunk(now, ramp(START_RAD, target, 300), now)  # 10 s of steps, stale after 0.3 s
    results = run_ticks(control, 1.0)
    reasons = [r.decision.reason for r in results if r.decision is not None]
    assert "chunk stale" in reasons
    last_write = max(w.time_s for w in goal_writes(bus))
    assert last_write < time.monotonic() - 0.5, "no goal after the chunk went stale"
    check_goal_writes(bus, control.safety_config)
    control.shutdown()


def test_estop_turns_torque_off_and_nothing_is_written_until_reset(bus, folder):
    control = controller(bus, folder)
    control.start()
    now = time.time()
    control.add_chunk(now, ramp(START_RAD, START_RAD + 0.4, 200), now)
    stopped_at = {}

    def estop_halfway(k, now):
        if k == 10:
            control.estop()
            stopped_at["t"] = time.monotonic()
        if k == 12:  # a chunk during the e-stop is refused, and counted
            assert control.add_chunk(now, np.repeat(START_RAD[None], 50, axis=0), now) == "arm estopped"

    run_ticks(control, 0.8, estop_halfway)
    assert not any(bus.torques().values())
    after = [w for w in bus.writes if w.time_s > stopped_at["t"]
             and (w.register == "Goal_Position" or (w.register == "Torque_Enable" and w.value == 1))]
    assert after == []
    assert control.ledger.balanced and control.ledger.rejected["arm estopped"] == 1
    assert control.stop().startswith("not stopped: the arm is estopped")  # and stop writes no goal either
    assert goal_writes(bus, stopped_at["t"]) == []
    before_reset = time.monotonic()
    assert control.reset().startswith("reset")
    assert all(bus.torques().values())
    seeds = goal_writes(bus, before_reset)[:6]
    assert all(abs(w.value - w.present_ticks) <= 1 for w in seeds), "reset seeds goal = present again"
    check_goal_writes(bus, control.safety_config)
    control.shutdown()


def test_stop_freezes_at_the_present_pose(bus, folder):
    control = controller(bus, folder)
    control.start()
    now = time.time()
    control.add_chunk(now, ramp(START_RAD, START_RAD + 0.5, 200), now)
    run_ticks(control, 0.4)
    assert control.stop() == "stopped at the present pose"
    bus_barrier(control.arm)  # the freeze is a sync write (no reply): the servos have taken it before looking
    frozen_at = time.monotonic()
    run_ticks(control, 0.3)
    frozen = bus.positions_rad()
    time.sleep(0.2)
    np.testing.assert_allclose(bus.positions_rad(), frozen, atol=0.01)
    assert goal_writes(bus, frozen_at) == []
    assert all(bus.torques().values()), "stop keeps torque on"
    check_goal_writes(bus, control.safety_config)
    control.shutdown()


def test_silent_servo_while_running_latches_after_n_failed_reads(bus, folder):
    control = controller(bus, folder, SafetyConfig(max_failed_reads=3))
    control.start()
    now = time.time()
    control.add_chunk(now, ramp(START_RAD, START_RAD + 0.3, 200), now)
    latched_at = {}

    def silence(k, now):
        if k == 8:
            bus.fault(3, silent=True)
        if control.chain.state == "fault" and "t" not in latched_at:
            latched_at["t"] = time.monotonic()

    run_ticks(control, 1.0, silence)
    assert control.chain.state == "fault" and "3 reads failed in a row" in control.chain.faults[0]
    assert goal_writes(bus, latched_at["t"]) == []
    check_goal_writes(bus, control.safety_config)
    assert control.shutdown() == ["elbow_flex"]
    assert [i for i, on in bus.torques().items() if on] == [3]


def test_corrupt_and_dropped_replies_are_survived_when_brief(bus, folder):
    # 5, not 3: on a loaded test machine the simulated bus itself can miss LeRobot's 50 ms reply timeout
    control = controller(bus, folder, SafetyConfig(max_failed_reads=5))
    control.start()
    now = time.time()
    control.add_chunk(now, ramp(START_RAD, START_RAD + 0.3, 200), now)

    def glitch(k, now):
        if k == 5:
            bus.fault(2, drop_replies=1)  # one lost reply: LeRobot's retry reads again
        if k == 10:
            bus.fault(4, corrupt=True)
        if k == 11:
            bus.fault(4, corrupt=False)

    run_ticks(control, 0.8, glitch)
    assert control.chain.writing, control.chain.faults
    assert control.stats.read_failures >= 1
    assert bus.stats.replies > 0
    check_goal_writes(bus, control.safety_config)
    control.shutdown()


def test_replies_that_come_too_late_are_not_read_as_positions(bus, folder):
    """The bus stalls through a status read: every servo's reply comes after the SDK gave up, in a burst. Left
    in the port, those packets (voltage 121, temperature 31) read as Present_Position 8057 in the next sync read,
    and LeRobot's max_relative_target guard in send_action computed a goal 500 degrees away from them (seen in
    CI: 'servo 1: goal 7715 outside raw limits')."""
    arm = follower(bus, folder)
    arm.configure()
    start = arm.activate()
    for then in ("read", "write"):
        bus.stall(60.0)
        assert not any(s.answered for s in arm.status())  # every status read timed out
        bus.stall(0.0)
        # the sim answers the six status requests at once (10 bytes each): they wait in the port
        assert wait_until(lambda: arm.bus.port_handler.ser.in_waiting >= 6 * 10)
        if then == "read":
            reading = arm.read()
            np.testing.assert_allclose(reading.positions, bus.positions_rad(), atol=0.01)
            assert reading.outside_range == ()
        else:  # a write with no read just before: LeRobot's guard needs the present position
            arm.write(start + 0.05)
            wait_until(lambda: np.allclose(bus.positions_rad(), start + 0.05, atol=0.02))
            np.testing.assert_allclose(bus.positions_rad(), start + 0.05, atol=0.02)
    assert arm.drained_bytes > 0  # the late replies came and were dropped
    for w in goal_writes(bus):
        assert bus.register(w.servo_id, "Min_Position_Limit") <= w.value <= bus.register(w.servo_id,
                                                                                         "Max_Position_Limit")
    arm.deactivate()


def test_a_stuck_motor_latches_on_tracking_error(bus, folder):
    config = SafetyConfig(max_tracking_error_rad=0.15, tracking_time_s=0.3)
    control = controller(bus, folder, config)
    control.start()
    bus.fault(1, stuck=True)
    now = time.time()
    control.add_chunk(now, np.repeat((START_RAD + np.array([0.8, 0, 0, 0, 0, 0]))[None], 100, axis=0), now)
    run_ticks(control, 1.5)
    assert control.chain.state == "fault" and "'shoulder_pan'" in control.chain.faults[0]
    latched = [w.time_s for w in goal_writes(bus)]
    count = len(latched)
    run_ticks(control, 0.2)
    assert len(goal_writes(bus)) == count, "no write after the latch"
    check_goal_writes(bus, config)
    control.shutdown()


def test_servo_error_flags_latch(bus, folder):
    control = controller(bus, folder, status_every=3)
    control.start()
    now = time.time()
    control.add_chunk(now, ramp(START_RAD, START_RAD + 0.3, 200), now)
    run_ticks_until(control, lambda: control.chain.state == "fault", 3.0,
                    lambda k, now: bus.fault(6, error_bits=ERROR_OVERHEAT) if k == 4 else None)
    assert control.chain.state == "fault" and "gripper: overheat" in control.chain.faults[0]
    statuses = {s.name: s for s in control.stats.statuses}
    assert statuses["gripper"].flags == ["overheat"]
    control.shutdown()


def test_a_position_outside_the_calibrated_range_latches(bus, folder):
    control = controller(bus, folder)
    control.start()
    bus.fault(4, position_bias=1500)  # wrist_flex reads 1500 ticks off: past its calibrated range
    run_ticks(control, 0.2)
    assert control.chain.state == "fault" and "wrist_flex" in control.chain.faults[0]
    assert [w for w in goal_writes(bus) if w.sync] == []
    control.shutdown()


def test_shutdown_moves_to_rest_within_the_bounds_then_torque_off(bus, folder):
    control = controller(bus, folder)
    control.start()
    rest = START_RAD + np.array([0.2, -0.2, 0.2, 0.0, 0.0, -0.1])
    began = time.monotonic()
    assert control.shutdown(rest_rad=rest, seconds=1.0) == []
    assert not any(bus.torques().values())
    assert len(goal_writes(bus, began)) >= 6 * 25
    np.testing.assert_allclose(bus.positions_rad(), rest, atol=0.03)
    check_goal_writes(bus, control.safety_config)


def test_shutdown_with_a_dead_motor_skips_the_move_and_turns_the_rest_off(bus, folder):
    control = controller(bus, folder)
    control.start()
    began = time.monotonic()
    bus.fault(5, silent=True)  # dies while running
    assert control.shutdown(rest_rad=START_RAD + 0.2, seconds=1.0) == ["wrist_roll"]
    assert [i for i, on in bus.torques().items() if on] == [5]
    assert goal_writes(bus, began) == [], "no blind move: the pose cannot be read"


def test_dry_run_never_enables_torque_nor_writes_a_goal(bus, folder):
    control = controller(bus, folder, dry_run=True)
    control.start()
    now = time.time()
    control.add_chunk(now, np.repeat((START_RAD + 0.3)[None], 100, axis=0), now)
    results = run_ticks(control, 0.4)
    assert all(r.reading is not None for r in results)
    assert any(r.decision.goal is not None for r in results), "the chain still computes goals"
    assert not any(bus.torques().values())
    assert goal_writes(bus) == []
    assert not [w for w in bus.writes if w.register == "Torque_Enable" and w.value == 1]
    control.shutdown(rest_rad=START_RAD)


def test_a_late_reply_during_the_calibration_check_is_not_read_as_the_next_register(bus, folder):
    """A loaded CI machine refused to start: "wrist_roll: register Max_Position_Limit = 0 but the file says
    range_max = 4095". LeRobot's read of Homing_Offset gave up on a slow reply and asked again; the late reply
    answered the retry, and the retry's own reply (Homing_Offset, 0) was taken for the next register's. Here
    the bus stalls through each register's first request in turn and then answers both it and LeRobot's retry
    at once, in order; the check must still see the file's values."""
    from act_node.arm.bus_checks import calibration_mismatches

    arm = follower(bus, folder)
    arm.configure()
    for register in ("Homing_Offset", "Min_Position_Limit", "Max_Position_Limit"):
        original, asked = arm.bus.read, []

        def late_first(name, motor, *args, _original=original, _register=register, _asked=asked, **kwargs):
            if name == _register and not _asked:  # past the SDK's 50 ms timeout, before the retry's
                _asked.append(name)
                bus.stall(0.08)
            return _original(name, motor, *args, **kwargs)

        arm.bus.read = late_first
        try:
            problems = calibration_mismatches(arm.bus, arm.calibration, folder / "x.json", ["wrist_roll"], "fix")
        finally:
            arm.bus.read = original
        assert problems == [], (register, problems)
    arm.deactivate()


@pytest.mark.parametrize("stall_s", [0.12, 0.5], ids=["late answers", "starved past three attempts"])
def test_a_stalled_bus_still_answers_the_presence_check(bus, folder, stall_s):
    """A loaded CI machine refused to start: "motor 'shoulder_pan' (id 1) does not answer". 0.12 s: the bus stalls
    through the first two attempts at asking servo 1 (each past the SDK's 50 ms timeout) and then answers
    everything asked meanwhile at once, in order: the third attempt gets the first one's reply, and that must
    still read as servo 1 answering, an STS3215. 0.5 s: a launch starting its nodes at once on two cores starved
    the bus past three attempts ("motor 'elbow_flex' (id 3) does not answer"): the check keeps asking for
    patience_s."""
    from act_node.arm.bus_checks import servo_problems

    arm = follower(bus, folder)
    arm.configure()
    problems = []
    bus.stall(stall_s)
    answering = servo_problems(arm.bus, bus.port, problems)
    assert problems == []
    assert answering == list(arm.bus.motors)
    arm.deactivate()


def test_the_motor_settings_are_written_through_a_bus_starved_past_three_tries(bus, folder):
    """CI refused to start the leader: "writing the leader's motor settings failed 3 times: ... There is no status
    packet!" (its nodes starting at once on two cores). The settings are some thirty writes, each tried once by
    LeRobot; until_written tries them again for patience_s, not three times back to back, so a bus that answers
    nothing for 0.6 s is waited out."""
    from act_node.arm.bus_checks import BUS_ERRORS, until_written

    arm = follower(bus, folder)
    arm.configure()
    writes_before = len(bus.writes)
    bus.stall(0.6)
    tries = until_written(arm._write_motor_settings, arm.bus.port_handler, (*BUS_ERRORS, RuntimeError))
    assert tries >= 2  # the first one lost its replies in the stall
    assert len(bus.writes) > writes_before
    arm.deactivate()


def test_writes_to_a_dead_servo_give_up_with_how_often_and_how_long_they_were_tried(bus, folder):
    from act_node.arm.bus_checks import BUS_ERRORS, WritesFailed, until_written

    arm = follower(bus, folder)
    arm.configure()
    bus.fault(3, silent=True)
    with pytest.raises(WritesFailed) as failed:
        until_written(arm._write_motor_settings, arm.bus.port_handler, (*BUS_ERRORS, RuntimeError), patience_s=0.3)
    assert failed.value.tries >= 3 and failed.value.seconds >= 0.3
    assert f"failed {failed.value.tries} times over" in str(failed.value)
    bus.fault(3, silent=False)
    arm.deactivate()


def test_shutdown_rides_out_a_lost_read_on_the_way_to_rest(bus, folder):
    """One read lost in the move to rest (both of LeRobot's tries: replies that never came, as on a loaded
    machine) counts as a failed read, as in the running loop: the move goes on from the next tick's read
    instead of ending there and turning torque off wherever the arm is."""
    control = controller(bus, folder)
    control.start()
    rest = START_RAD + np.array([0.2, -0.2, 0.2, 0.0, 0.0, -0.1])
    bus.fault(3, drop_replies=2)  # the move's first read and LeRobot's retry of it
    assert control.shutdown(rest_rad=rest, seconds=1.0) == []
    assert bus.servos[3].faults.drop_replies == 0, "the replies were lost"
    assert not any(bus.torques().values())
    np.testing.assert_allclose(bus.positions_rad(), rest, atol=0.03)
    check_goal_writes(bus, control.safety_config)


def test_waiting_for_a_reply_leaves_the_process_to_its_other_threads(bus, folder):
    """The Feetech SDK polls the port until a reply is complete or its timeout (about 50 ms) passes. With the
    port's timeout=0 that loop spins holding the GIL for the whole wait, and on a loaded machine the simulated
    bus's own threads (a ROS executor or a camera beside a real arm) got to run only past the SDK's timeout.
    Waiting on a silent servo must sleep in the kernel: one port read per READ_WAIT_S at most (about 50 for the
    timeout), where the spinning loop makes thousands."""
    arm = follower(bus, folder)
    arm.configure()
    bus.fault(3, silent=True)
    serial = arm.bus.port_handler.ser
    reads, original = [], serial.read
    serial.read = lambda size=1: reads.append(size) or original(size)
    try:
        statuses = arm.status()
    finally:
        serial.read = original
    assert [s.answered for s in statuses] == [True, True, False, True, True, True]
    assert len(reads) < 200, f"{len(reads)} port reads while waiting for one silent servo: a busy loop"
    arm.deactivate()
