"""Checks of a Feetech bus before anything is written, shared by the follower and the leader: which servos
answer (and are what they should be), and whether their calibration registers hold what the file says.
Each returns sentences naming the motor, the value seen and what was expected, so that a refusal lists every
problem at once."""

from __future__ import annotations

import time
from pathlib import Path

from act_node.arm.calibration import Calibration
from act_node.arm.interface import describe_flags
from act_node.arm.servo_sim import REGISTERS, STS3215_MODEL

# what the Feetech SDK raises on a missing adapter or a garbled, short reply (IndexError: a cut status packet)
BUS_ERRORS = (ConnectionError, OSError, IndexError)
RETRY_PAUSE_S = 0.05  # between two tries of until_written: a dead port fails at once, and is not asked in a spin
CALIBRATION_REGISTERS = {"homing_offset": "Homing_Offset", "range_min": "Min_Position_Limit",
                         "range_max": "Max_Position_Limit"}
DRAIN_QUIET_S = 0.005  # after a failed or doubtful transaction: the port must stay silent this long ...
DRAIN_LIMIT_S = 0.05  # ... within this long, everything that came meanwhile dropped
READ_WAIT_S = 0.001  # one read of the port waits this long in the kernel for the bytes the SDK asked for


# --- the port's input ---------------------------------------------------------------------------------------
def wait_in_kernel(port_handler) -> None:
    """Make the SDK wait for a reply in the kernel instead of spinning. It opens the port with pyserial's
    timeout=0 and polls it in a loop until the reply is complete or its timeout (about 50 ms) passes: a thread
    that holds the GIL for the whole wait, starving the process's other threads (a ROS executor, a camera, the
    simulated bus's servos, which then answered past the timeout on a loaded machine: "There is no status
    packet!"). With a read timeout each poll sleeps in select() until bytes come, at most READ_WAIT_S; the
    SDK's own timeout still decides when a reply is missing, READ_WAIT_S later at most."""
    serial = getattr(port_handler, "ser", None)
    if serial is not None:
        serial.timeout = READ_WAIT_S


# A reply that comes after the SDK's timeout stays in the port and is taken as the answer to the next request:
# the SDK's clearPort() is serial flush() (it waits for the output; it drops nothing read), and its readRx()
# takes the first packet of the right servo ID. So input left in the port is dropped before every request, and
# after a transaction that failed (or read something doubtful) the port is drained until it is quiet.
def drop_input(port_handler) -> int:
    """Drop what waits in the port (a late reply); how many bytes. An adapter gone away drops nothing: the
    request that follows says so."""
    serial = getattr(port_handler, "ser", None)
    try:
        waiting = serial.in_waiting if serial is not None else 0
        return len(serial.read(waiting)) if waiting else 0
    except OSError:
        return 0


def drain(port_handler) -> int:
    """Drop input until the port has been silent DRAIN_QUIET_S (at most DRAIN_LIMIT_S): the replies a failed
    transaction gave up on may still be coming. How many bytes went."""
    if getattr(port_handler, "ser", None) is None:
        return 0
    dropped = 0
    began = quiet_since = time.monotonic()
    while time.monotonic() - began < DRAIN_LIMIT_S:
        got = drop_input(port_handler)
        dropped += got
        if got:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= DRAIN_QUIET_S:
            break
        time.sleep(0.001)
    return dropped


def one_line(error: BaseException) -> str:
    """LeRobot's connection errors span lines and hide the cause in __cause__: one line with both."""
    text = " ".join(str(error).split())
    cause = error.__cause__
    return f"{text} ({' '.join(str(cause).split())})" if cause is not None and str(cause) else text


class WritesFailed(Exception):
    """`until_written` ran out of tries and time: `tries`, over `seconds`, the last `error`."""

    def __init__(self, tries: int, seconds: float, error: BaseException):
        super().__init__(f"failed {tries} times over {seconds:.1f} s: {one_line(error)}")
        self.tries, self.seconds, self.error = tries, seconds, error


def until_written(write, port_handler, errors: tuple = BUS_ERRORS, attempts: int = 3,
                  patience_s: float = 1.5) -> int:
    """Call `write` (register writes that may be repeated: the same values again) until it returns: at least
    `attempts` times and for at least `patience_s`, the late replies of a failed try drained before the next; the
    tries it took. WritesFailed after the last. LeRobot's own writes try once, and a sequence of thirty (configure())
    lost one reply in three tries back to back when a launch started its nodes at once on two cores: spread over
    `patience_s`, the tries outlast a starved moment, as servo_problems' reads do."""
    began = time.monotonic()
    tries = 0
    while True:
        tries += 1
        try:
            write()
            return tries
        except errors as error:
            if tries >= attempts and time.monotonic() - began >= patience_s:
                raise WritesFailed(tries, time.monotonic() - began, error) from error
        drain(port_handler)
        time.sleep(RETRY_PAUSE_S)


def servo_problems(bus, port: str, problems: list[str], attempts: int = 3,
                   patience_s: float = 1.5) -> list[str]:
    """Ask every servo of LeRobot's `bus` its model (appending what is wrong to `problems`): the ones that
    answered.

    One read of Model_Number an attempt, not the SDK's ping(): that is two requests (PING, then the same read),
    so the late reply to an attempt that timed out answered the next attempt's PING and left that PING's reply
    (no data) to be taken for its read: IndexError, and a live servo reported dead ("motor 'shoulder_pan' (id 1)
    does not answer", seen on a loaded machine). Every attempt asks the same, so a late reply is still the
    right answer. Through the SDK, not LeRobot's ping(), which hides a servo that answers with error flags.

    A servo is asked at least `attempts` times and for at least `patience_s`: three attempts of one packet timeout
    each (50 ms) were over before a bus starved of CPU answered (seen when a launch started its nodes at once on
    two cores), and one servo called dead refuses the whole launch."""
    answering = []
    handler, port_handler = bus.packet_handler, bus.port_handler
    address, size = REGISTERS["Model_Number"]
    for name, motor in bus.motors.items():
        model = None
        deadline, tries = time.monotonic() + patience_s, 0
        while tries < attempts or time.monotonic() < deadline:
            tries += 1
            drop_input(port_handler)  # a late reply to another servo's request: not this one's answer
            try:
                data, comm, error = handler.readTxRx(port_handler, motor.id, address, size)
            except BUS_ERRORS:
                data, comm, error = [], -1, 0
            if comm == 0 and len(data) == size:  # a reply cut short is no answer either
                model = int.from_bytes(bytes(data), "little")
                break
            drain(port_handler)  # its reply may still be coming
        if model is None:
            problems.append(f"motor {name!r} (id {motor.id}) does not answer on {port}")
            continue
        answering.append(name)
        if model != STS3215_MODEL:
            problems.append(f"motor {name!r} (id {motor.id}) is model {model}, expected STS3215 ({STS3215_MODEL})")
        if error:  # LeRobot's writes in configure() would fail on them anyway
            problems.append(f"motor {name!r} (id {motor.id}) reports {describe_flags(error)}")
    return answering


def calibration_mismatches(bus, calibration: Calibration, path: Path, motors: list[str], remedy: str) -> list[str]:
    """Where the `motors`' homing offset and range registers differ from the calibration file at `path`.
    A value that differs is read again once the port is quiet: a read LeRobot retried may have taken the late
    reply of the one before, leaving its own reply to be taken for the next register's (seen on a loaded
    machine: wrist_roll's Max_Position_Limit read as 0, its Min_Position_Limit's value)."""
    problems, differ = [], False
    for name in motors:
        expected = calibration.motors[name]
        for field, register in CALIBRATION_REGISTERS.items():
            try:
                drop_input(bus.port_handler)
                value = bus.read(register, name, normalize=False, num_retry=2)
                if value != getattr(expected, field):
                    drain(bus.port_handler)
                    value = bus.read(register, name, normalize=False, num_retry=2)
            except (*BUS_ERRORS, RuntimeError) as error:
                drain(bus.port_handler)
                problems.append(f"motor {name!r}: cannot read {register}: {one_line(error)}")
                continue
            if value != getattr(expected, field):
                differ = True
                problems.append(f"motor {name!r}: register {register} = {value} but {path} says {field} = "
                                f"{getattr(expected, field)}")
    if differ:  # the remedy once, after every register named
        problems.append(f"the servos' calibration registers disagree with {path}: {remedy}")
    return problems
