"""The arm interface that a simulated arm and the real SO-101 both implement, in ros2_control's lifecycle:

    configure()   open the port and check everything; refuse (ArmConfigurationError, every problem listed)
    activate()    seed every goal from a fresh read (goal = present), and only then enable torque
    read()        joint positions (6,) in radians with the time they were read; ArmReadError when the bus fails
    write(goal)   one goal (6,) in radians; nothing else (the safety chain decides what may be written)
    status()      per servo: answered, error flags, voltage, temperature
    set_torque()  on or off on every servo that answers; returns the ones that did not
    deactivate()  torque off on every servo that answers (even when one is dead), then close the port

Everything here is in radians, joints in act_node.so101.JOINT_NAMES order.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from act_node import so101

# STS3215 status error byte and Status register bits -> what they mean
SERVO_FLAGS = {0x01: "input voltage", 0x02: "angle sensor", 0x04: "overheat", 0x08: "overcurrent",
               0x20: "overload"}


def describe_flags(bits: int) -> list[str]:
    """['overload', ...] for a servo's error bits; unknown bits as hex."""
    names = [name for bit, name in SERVO_FLAGS.items() if bits & bit]
    rest = bits & ~sum(SERVO_FLAGS)
    return names + ([f"bits {rest:#04x}"] if rest else [])


class ArmError(RuntimeError):
    """The arm cannot do what was asked; the text names the servo and what failed."""


class ArmReadError(ArmError):
    pass


class ArmConfigurationError(ArmError, ValueError):
    """Refusing to start: every problem found, one per line. A ValueError too, so that a node's runner
    reports it as a refusal (one message, exit code 2) rather than as a bug with its traceback."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("the arm is not ready:\n" + "\n".join(f"  - {p}" for p in self.problems))


@dataclass
class JointReading:
    positions: np.ndarray  # (6,) radians
    stamp_s: float  # wall time (time.time()) in the middle of the read
    ticks: np.ndarray | None = None  # (6,) raw Present_Position when the arm has servos
    outside_range: tuple[str, ...] = ()  # joints whose position lies outside the calibrated range


@dataclass
class ServoStatus:
    name: str
    answered: bool
    error_bits: int = 0  # status packet error byte | Status register
    voltage_v: float = float("nan")
    temperature_c: float = float("nan")

    @property
    def flags(self) -> list[str]:
        return describe_flags(self.error_bits)


class ArmInterface(abc.ABC):
    joint_names: tuple[str, ...] = so101.JOINT_NAMES

    @abc.abstractmethod
    def configure(self) -> None: ...

    @abc.abstractmethod
    def activate(self) -> np.ndarray:
        """Seed the goals from a fresh read, then enable torque; returns the seeded goal (6,) radians."""

    @abc.abstractmethod
    def deactivate(self) -> list[str]:
        """Torque off on every servo that answers, close; returns the servos that did not answer."""

    @abc.abstractmethod
    def read(self) -> JointReading: ...

    @abc.abstractmethod
    def write(self, goal_rad: np.ndarray) -> None: ...

    @abc.abstractmethod
    def set_torque(self, enabled: bool) -> list[str]: ...

    @abc.abstractmethod
    def status(self) -> list[ServoStatus]: ...

    @abc.abstractmethod
    def calibrated_range(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) (6,) radians where the arm's calibration says the joints may go."""
