"""Checks of a Feetech bus before anything is written, shared by the follower and the leader: which servos
answer (and are what they should be), and whether their calibration registers hold what the file says.
Each returns sentences naming the motor, the value seen and what was expected, so that a refusal lists every
problem at once."""

from __future__ import annotations

from pathlib import Path

from act_node.arm.calibration import Calibration
from act_node.arm.interface import describe_flags
from act_node.arm.servo_sim import STS3215_MODEL

# what the Feetech SDK raises on a missing adapter or a garbled, short reply (IndexError: a cut status packet)
BUS_ERRORS = (ConnectionError, OSError, IndexError)
CALIBRATION_REGISTERS = {"homing_offset": "Homing_Offset", "range_min": "Min_Position_Limit",
                         "range_max": "Max_Position_Limit"}


def one_line(error: BaseException) -> str:
    """LeRobot's connection errors span lines and hide the cause in __cause__: one line with both."""
    text = " ".join(str(error).split())
    cause = error.__cause__
    return f"{text} ({' '.join(str(cause).split())})" if cause is not None and str(cause) else text


def servo_problems(bus, port: str, problems: list[str]) -> list[str]:
    """Ping every servo of LeRobot's `bus` (appending what is wrong to `problems`): the ones that answered."""
    answering = []
    handler, port_handler = bus.packet_handler, bus.port_handler
    for name, motor in bus.motors.items():
        for _ in range(3):  # LeRobot's ping() hides a servo that answers with error flags: ask the SDK
            try:
                model, comm, error = handler.ping(port_handler, motor.id)
            except BUS_ERRORS:
                model, comm, error = 0, -1, 0
            if comm == 0:
                break
        if comm != 0:
            problems.append(f"motor {name!r} (id {motor.id}) does not answer on {port}")
            continue
        answering.append(name)
        if model != STS3215_MODEL:
            problems.append(f"motor {name!r} (id {motor.id}) is model {model}, expected STS3215 ({STS3215_MODEL})")
        if error:  # LeRobot's writes in configure() would fail on them anyway
            problems.append(f"motor {name!r} (id {motor.id}) reports {describe_flags(error)}")
    return answering


def calibration_mismatches(bus, calibration: Calibration, path: Path, motors: list[str], remedy: str) -> list[str]:
    """Where the `motors`' homing offset and range registers differ from the calibration file at `path`."""
    problems = []
    for name in motors:
        expected = calibration.motors[name]
        for field, register in CALIBRATION_REGISTERS.items():
            try:
                value = bus.read(register, name, normalize=False, num_retry=2)
            except (*BUS_ERRORS, RuntimeError) as error:
                problems.append(f"motor {name!r}: cannot read {register}: {one_line(error)}")
                continue
            if value != getattr(expected, field):
                problems.append(f"motor {name!r}: register {register} = {value} but {path} says {field} = "
                                f"{getattr(expected, field)} ({remedy})")
    return problems
