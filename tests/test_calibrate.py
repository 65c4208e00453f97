"""`lerobot-calibrate` (LeRobot's own command, unmodified) against the simulated bus: its simulated hand moves each
joint through the arm's range while LeRobot records it, the file written is one the arm node accepts and reads the
arm's true angles through, and a calibration cut short leaves registers that are refused with the way back, which
the same command then takes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import wait_for

from act_node.arm.calibration import Calibration, so101_calibration
from act_node.arm.follower import SO101FollowerArm
from act_node.arm.interface import ArmConfigurationError
from act_node.arm.servo_sim import SimulatedBus

TRUE_HOMING = {"shoulder_pan": 300, "shoulder_lift": -200, "elbow_flex": 150, "wrist_flex": -90, "wrist_roll": 0,
               "gripper": 600}


class BusTimedOut(Exception):
    """LeRobot's own bus calls timed out before the hand started (ConnectionError): the simulated bus, a thread of
    this process, was starved of CPU."""


# what LeRobot says when a reply of the simulated bus came too late: its reads and writes try once
# (num_retry 0; "Failed to write 'Min_Position_Limit' on id_=5 with '0' after 1 tries. [TxRxResult] There is no
# status packet!" in a full run on a quiet machine)
MISSED_REPLY = ("There is no status packet", "ConnectionError")


def calibrate(bus: SimulatedBus, folder, said: list[str], answers: list[str], wait_for_hand: bool = True,
              kill_after_hand_starts: bool = False) -> subprocess.CompletedProcess | None:
    """`run_calibrate`, once more if LeRobot's own bus calls missed a reply of the simulated bus (a thread of this
    process, starved of CPU at times): what is tested is the hand, the file and the registers, not LeRobot's
    single-try timeouts. The retry says so on stdout."""
    try:
        result = run_calibrate(bus, folder, said, answers, wait_for_hand, kill_after_hand_starts)
    except BusTimedOut as timed_out:
        missed = str(timed_out)
    else:
        if result is None or result.returncode == 0 or not any(text in result.stdout for text in MISSED_REPLY):
            return result
        missed = result.stdout[-3000:]
    print(f"lerobot-calibrate missed a reply of the simulated bus; once more:\n{missed}")
    said.clear()
    return run_calibrate(bus, folder, said, answers, wait_for_hand, kill_after_hand_starts)


def run_calibrate(bus: SimulatedBus, folder, said: list[str], answers: list[str], wait_for_hand: bool = True,
                  kill_after_hand_starts: bool = False) -> subprocess.CompletedProcess | None:
    """Run lerobot-calibrate for robot id 'follower' on the bus, answering its prompts as a person would: each of
    `answers` is one line; before the last, wait until the simulated hand says it is done (`wait_for_hand`)."""
    command = [str(Path(sys.executable).parent / "lerobot-calibrate"), "--robot.type=so101_follower",
               f"--robot.port={bus.port}", "--robot.id=follower", f"--robot.calibration_dir={folder}"]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(process.stdout), daemon=True)
    reader.start()
    moving = lambda: any("simulated hand: moving" in line for line in said)  # noqa: E731
    try:
        for k, answer in enumerate(answers):
            if k == len(answers) - 1 and wait_for_hand:
                wait_for(lambda: moving() or process.poll() is not None, 60.0)
                if not moving():
                    reader.join(timeout=5)
                    text = "".join(out)[-3000:]
                    if process.poll() is not None and any(missed in text for missed in MISSED_REPLY):
                        raise BusTimedOut(text)
                    raise AssertionError(f"the simulated hand never started:\n{text}")
                if kill_after_hand_starts:
                    time.sleep(0.5)
                    process.kill()
                    process.wait(timeout=30)
                    return None
                assert wait_for(lambda: any("press ENTER" in line for line in said), 120.0), said
            time.sleep(1.0)  # the prompt is up
            process.stdin.write(answer + "\n")
            process.stdin.flush()
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(timeout=5)
    return subprocess.CompletedProcess(command, process.returncode, "".join(out))


def follower(bus: SimulatedBus, folder) -> SO101FollowerArm:
    arm = SO101FollowerArm(bus.port, "follower", folder)
    arm.configure()
    return arm


@pytest.fixture
def bus():
    said: list[str] = []
    with SimulatedBus(so101_calibration(TRUE_HOMING), start_rad=np.zeros(6), hand_speed_rad_s=4.0,
                      say=said.append) as sim:
        sim.said = said
        yield sim


def test_lerobot_calibrate_records_the_ranges_the_hand_moves_through_and_the_arm_takes_the_file(bus, tmp_path):
    result = calibrate(bus, tmp_path, bus.said, ["", ""])  # ENTER at the middle, ENTER once the hand is done
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Calibration saved to" in result.stdout
    written = Calibration.load(tmp_path / "follower.json")
    truth = so101_calibration(TRUE_HOMING)
    assert [line for line in bus.said if "moving" in line] == [
        f"simulated hand: moving {name} through its range"
        for name in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "gripper")]
    for name, motor in written.motors.items():  # the true range, seen from the new homing, to a tick or two
        true = truth.motors[name]
        if name == "wrist_roll":
            assert (motor.range_min, motor.range_max) == (0, 4095)
            continue
        shift = true.homing_offset - motor.homing_offset
        assert abs(motor.range_min - (true.range_min + shift)) <= 2, (name, motor, true)
        assert abs(motor.range_max - (true.range_max + shift)) <= 2, (name, motor, true)
    arm = follower(bus, tmp_path)  # no refusal: the registers hold what the file says
    try:
        reading = arm.read()
        body = [0, 1, 2, 3, 5]  # wrist_roll's full-turn range has another middle than the true file's
        assert np.allclose(reading.positions[body], bus.positions_rad()[body], atol=0.01), (reading.positions,
                                                                                             bus.positions_rad())
    finally:
        arm.deactivate()


def test_a_calibration_cut_short_is_refused_with_the_way_back_which_lerobot_calibrate_takes(bus, tmp_path):
    assert calibrate(bus, tmp_path, bus.said, ["", ""]).returncode == 0
    bus.said.clear()
    # again with 'c' (calibrate anew), killed while the hand moves: the registers are reset, the file is the old one
    assert calibrate(bus, tmp_path, bus.said, ["c", "", ""], kill_after_hand_starts=True) is None
    with pytest.raises(ArmConfigurationError) as refused:
        follower(bus, tmp_path)
    text = str(refused.value)
    assert "register Min_Position_Limit = 0" in text
    assert f"disagree with {tmp_path / 'follower.json'}: lerobot-calibrate --robot.type=so101_follower " \
           f"--robot.port={bus.port} --robot.id=follower --robot.calibration_dir={tmp_path}, then ENTER writes " \
           "the file's values to the servos" in text
    assert wait_for(lambda: any("press ENTER" in line for line in bus.said), 120.0)  # the hand lets go
    result = calibrate(bus, tmp_path, bus.said, [""], wait_for_hand=False)  # ENTER: the file's values written
    assert result.returncode == 0, result.stdout[-3000:]
    follower(bus, tmp_path).deactivate()
