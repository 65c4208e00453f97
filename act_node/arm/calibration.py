"""An SO-101 follower's LeRobot calibration, and the one conversion between raw STS3215 ticks and radians.

The file is the one `lerobot-calibrate` writes (`<calibration_dir>/<id>.json`): per motor `id`, `drive_mode`,
`homing_offset`, `range_min`, `range_max`. Raw ticks are what `Present_Position` / `Goal_Position` hold after
the servo subtracts its homing offset (0..4095, 4096 per turn). LeRobot's SO follower with `use_degrees=True`
turns ticks into degrees about the middle of the calibrated range for the five body joints, and the gripper
into 0..100 across its range (clamped); `act_node.so101` turns those units into radians. This module mirrors
LeRobot's normalisation so that the simulated servos and the range checks speak the same ticks
(tests/test_arm.py checks it against LeRobot's own bus).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from act_node import so101

RESOLUTION = 4096  # STS3215: ticks per turn
MAX_TICK = RESOLUTION - 1
DEGREES_PER_TICK = 360.0 / MAX_TICK  # LeRobot divides by resolution - 1
MOTOR_IDS = {name: index + 1 for index, name in enumerate(so101.JOINT_NAMES)}  # the SO-101's bus IDs 1..6
GRIPPER_NAME = so101.JOINT_NAMES[so101.GRIPPER]
FIELDS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")


class CalibrationError(ValueError):
    """A calibration file that cannot be used; the text names the file, the motor and the field."""


@dataclass(frozen=True)
class MotorCalibration:
    id: int
    drive_mode: int
    homing_offset: int  # ticks the servo subtracts from its encoder reading
    range_min: int  # calibrated range, raw ticks
    range_max: int

    @property
    def mid(self) -> float:
        return (self.range_min + self.range_max) / 2


@dataclass(frozen=True)
class Calibration:
    motors: dict[str, MotorCalibration]

    # --- the file ----------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """Read a LeRobot calibration file; CalibrationError says what is missing or wrong."""
        path = Path(path)
        try:
            entries = json.loads(path.read_text())
        except FileNotFoundError:
            raise CalibrationError(f"calibration file {path} does not exist (run lerobot-calibrate for this "
                                   f"robot id first)") from None
        except (OSError, json.JSONDecodeError) as error:
            raise CalibrationError(f"calibration file {path} cannot be read: {error}") from None
        if not isinstance(entries, dict):
            raise CalibrationError(f"calibration file {path} holds {type(entries).__name__}, expected an object "
                                   f"with one entry per motor {so101.JOINT_NAMES}")
        missing = [name for name in so101.JOINT_NAMES if name not in entries]
        if missing:
            raise CalibrationError(f"calibration file {path} lacks motors {missing} (it has {sorted(entries)})")
        motors = {}
        for name in so101.JOINT_NAMES:
            entry = entries[name]
            absent = [f for f in FIELDS if not isinstance(entry, dict) or not isinstance(entry.get(f), int)]
            if absent:
                raise CalibrationError(f"calibration file {path}: motor {name!r} lacks integer fields {absent}")
            motor = MotorCalibration(**{f: entry[f] for f in FIELDS})
            if motor.range_min >= motor.range_max:
                raise CalibrationError(f"calibration file {path}: motor {name!r} has range_min {motor.range_min} "
                                       f">= range_max {motor.range_max}")
            motors[name] = motor
        return cls(motors)

    def save(self, path: str | Path) -> None:
        """Write the file in LeRobot's format (what draccus dumps for dict[str, MotorCalibration])."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({name: asdict(m) for name, m in self.motors.items()}, indent=4))

    # --- ticks <-> LeRobot units <-> radians -------------------------------------------------------------
    def _column(self, field: str) -> np.ndarray:
        return np.array([getattr(self.motors[name], field) for name in so101.JOINT_NAMES], dtype=np.float64)

    def lerobot_units(self, ticks: np.ndarray) -> np.ndarray:
        """Raw ticks (..., 6) -> LeRobot's use_degrees units: degrees about the range's middle, gripper 0..100."""
        ticks = np.asarray(ticks, dtype=np.float64)
        low, high = self._column("range_min"), self._column("range_max")
        out = (ticks - (low + high) / 2) * DEGREES_PER_TICK
        g = so101.GRIPPER
        out[..., g] = (np.clip(ticks[..., g], low[g], high[g]) - low[g]) / (high[g] - low[g]) * 100.0
        if self.motors[GRIPPER_NAME].drive_mode:
            out[..., g] = 100.0 - out[..., g]
        return out

    def ticks(self, values: np.ndarray) -> np.ndarray:
        """LeRobot units (..., 6) -> raw ticks (rounded; LeRobot itself truncates)."""
        values = np.asarray(values, dtype=np.float64)
        low, high = self._column("range_min"), self._column("range_max")
        out = values / DEGREES_PER_TICK + (low + high) / 2
        g = so101.GRIPPER
        gripper = 100.0 - values[..., g] if self.motors[GRIPPER_NAME].drive_mode else values[..., g]
        out[..., g] = np.clip(gripper, 0.0, 100.0) / 100.0 * (high[g] - low[g]) + low[g]
        return np.rint(out).astype(np.int64)

    def to_radians(self, ticks: np.ndarray) -> np.ndarray:
        return so101.from_lerobot(self.lerobot_units(ticks))

    def from_radians(self, radians: np.ndarray) -> np.ndarray:
        return self.ticks(so101.to_lerobot(radians))

    def range_ticks(self) -> tuple[np.ndarray, np.ndarray]:
        return self._column("range_min").astype(np.int64), self._column("range_max").astype(np.int64)

    def range_radians(self) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated range (6,), (6,) in radians: where the file says the joints may go."""
        low, high = self.range_ticks()
        a, b = self.to_radians(low), self.to_radians(high)
        return np.minimum(a, b), np.maximum(a, b)

    def outside_range(self, ticks: np.ndarray) -> list[str]:
        """Names of the joints whose raw ticks lie outside the calibrated range."""
        low, high = self.range_ticks()
        ticks = np.asarray(ticks)
        return [name for name, t, lo, hi in zip(so101.JOINT_NAMES, ticks, low, high) if not lo <= t <= hi]


def so101_calibration(homing_offsets: dict[str, int] | None = None, slack_deg: float = 2.0) -> Calibration:
    """A calibration whose range's middle is each body joint's zero, covering the SO-101 description's range
    plus `slack_deg`; wrist_roll spans the full turn (LeRobot records it so); the gripper's range maps 0..100
    onto its joint range. What the simulated bus uses, and a fair stand-in for a real arm's file."""
    homing_offsets = homing_offsets or {}
    motors = {}
    centre = MAX_TICK // 2  # 2047
    for index, name in enumerate(so101.JOINT_NAMES):
        if name == "wrist_roll":
            low, high = 0, MAX_TICK
        elif index == so101.GRIPPER:
            span = math.ceil(math.degrees(so101.UPPER_RAD[index] - so101.LOWER_RAD[index]) / DEGREES_PER_TICK)
            low, high = centre - span // 2, centre - span // 2 + span
        else:
            reach = max(abs(so101.LOWER_RAD[index]), abs(so101.UPPER_RAD[index]))
            half = math.ceil((math.degrees(reach) + slack_deg) / DEGREES_PER_TICK)
            low, high = centre - half, centre + half
        motors[name] = MotorCalibration(MOTOR_IDS[name], 0, int(homing_offsets.get(name, 0)), low, high)
    return Calibration(motors)
