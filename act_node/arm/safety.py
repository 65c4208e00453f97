"""The safety chain between act_node.chunks.ChunkExecutor and the arm, and the ledger of chunks.

Each tick, in this order (a filter that changes a joint counts a clamp under its name):

    executor Command --> held? (stale chunk / no step) --> hold: no new goal
                     --> finite          NaN or inf: hold, count a rejection
                     --> range           the joint ranges intersected with the calibrated range, less a margin
                     --> velocity        |goal - previous goal| <= max_velocity / fps
                     --> from_measured   |goal - measured| <= max_from_measured (LeRobot's max_relative_target)
                     --> goal

The first goal is the measured pose (start() and reset()), so nothing jumps when a policy starts. Faults latch
and stop every write until reset(): `max_failed_reads` reads failing in a row, a tracking error (|previous goal -
measured|, body joints: a gripper holding something never reaches its goal) above `max_tracking_error_rad` for
longer than `tracking_time_s`, a servo's error flags, a position
outside the calibrated range. stop() freezes at the present pose; estop() latches until reset() (the caller
turns torque off). Radians and seconds throughout; pure Python.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from act_node import so101
from act_node.arm.interface import JointReading, ServoStatus
from act_node.settings import FPS, SETTINGS

# The arm node's default velocity bound; not so101.MAX_VELOCITY_RAD_S, the servo's speed. The sim's executor
# allows 4.7 rad/s, the STS3215's no-load speed: a loaded SO-101 joint does not reach it, and a goal running
# ahead of the arm only builds tracking error. The scripted expert's picks (20 episodes: `python
# bench/bench_arm.py --expert-speeds`) move a body joint at most 1.65 rad/s (wrist_roll; the others <= 1.36);
# its gripper commands are steps (6.5 rad/s) and get slowed to this bound. 2.0 rad/s leaves the body's motion
# unclamped and caps a bad chunk at 0.067 rad (3.8 deg) per tick at 30 fps.
VELOCITY_BOUND_RAD_S = SETTINGS["max_velocity_rad_s"].default
STATES = ("idle", "running", "stopped", "estopped", "fault")


@dataclass
class SafetyConfig:
    # the defaults, each with what it is and its range: act_node.settings, the one table the arm node declares from
    fps: float = float(FPS)
    margin_rad: float = SETTINGS["margin_rad"].default  # kept off the ends of the calibrated range
    max_velocity_rad_s: float = SETTINGS["max_velocity_rad_s"].default  # VELOCITY_BOUND_RAD_S
    max_from_measured_rad: float = SETTINGS["max_from_measured_rad"].default  # LeRobot's max_relative_target
    max_failed_reads: int = SETTINGS["max_failed_reads"].default  # in a row
    max_tracking_error_rad: float = SETTINGS["max_tracking_error_rad"].default
    tracking_time_s: float = SETTINGS["tracking_time_s"].default
    track_gripper: bool = False  # a gripper holding an object never reaches its goal: not a fault

    def __post_init__(self):
        for name in ("fps", "max_velocity_rad_s", "max_from_measured_rad", "max_tracking_error_rad",
                     "tracking_time_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"safety {name} must be a positive number, got {value}")
        if not self.margin_rad >= 0:
            raise ValueError(f"safety margin_rad must be >= 0, got {self.margin_rad}")
        if self.max_failed_reads < 1:
            raise ValueError(f"safety max_failed_reads must be >= 1, got {self.max_failed_reads}")

    @property
    def max_step_rad(self) -> float:
        return self.max_velocity_rad_s / self.fps


@dataclass
class Decision:
    goal: np.ndarray | None  # (6,) radians to write, or None: write nothing this tick
    reason: str = ""  # why nothing or the previous goal is written
    clamped: dict[str, int] = field(default_factory=dict)  # filter -> joints it changed this tick


class SafetyChain:
    def __init__(self, config: SafetyConfig, joint_lower: np.ndarray, joint_upper: np.ndarray,
                 calibrated_lower: np.ndarray, calibrated_upper: np.ndarray, names: tuple[str, ...]):
        self.config = config
        self.names = names
        self.lower = np.maximum(joint_lower, calibrated_lower) + config.margin_rad
        self.upper = np.minimum(joint_upper, calibrated_upper) - config.margin_rad
        empty = [n for n, lo, hi in zip(names, self.lower, self.upper) if lo >= hi]
        if empty:
            raise ValueError(f"joints {empty}: the joint range intersected with the calibrated range, less "
                             f"{config.margin_rad} rad, is empty (lower {self.lower.round(3).tolist()}, upper "
                             f"{self.upper.round(3).tolist()})")
        self.state = "idle"
        self.faults: list[str] = []  # why the chain latched, first first
        self.last_goal: np.ndarray | None = None
        self.failed_reads = 0
        self._tracking_since: float | None = None
        self.clamps: Counter[str] = Counter()  # totals since start
        self.holds: Counter[str] = Counter()
        self.hold_reason = ""

    @property
    def writing(self) -> bool:
        return self.state == "running"

    # --- lifecycle -----------------------------------------------------------------------------------------
    def start(self, measured: np.ndarray) -> np.ndarray:
        """Run from the measured pose: it is the first goal."""
        self.last_goal = np.asarray(measured, float).copy()
        self.state, self.faults, self.failed_reads, self._tracking_since = "running", [], 0, None
        return self.last_goal.copy()

    def reset(self, measured: np.ndarray) -> np.ndarray:
        """Clear stop, e-stop and latched faults; run again from the measured pose."""
        return self.start(measured)

    def stop(self, measured: np.ndarray) -> np.ndarray:
        """Freeze: the present pose is the last goal; nothing more is written until reset()."""
        self.last_goal = np.asarray(measured, float).copy()
        if self.state in ("idle", "running"):
            self.state = "stopped"
        return self.last_goal.copy()

    def estop(self) -> None:
        self.state = "estopped"

    def latch(self, reason: str) -> None:
        self.faults.append(reason)
        if self.state in ("idle", "running", "stopped"):
            self.state = "fault"

    # --- what the bus reports --------------------------------------------------------------------------------
    def on_read(self, reading: JointReading, now_s: float) -> None:
        self.failed_reads = 0
        if reading.outside_range and self.state != "fault":
            self.latch(f"joints {list(reading.outside_range)} read outside the calibrated range")
        if self.last_goal is None or self.state != "running":
            self._tracking_since = None
            return
        error = np.abs(self.last_goal - reading.positions)
        if not self.config.track_gripper:
            error[so101.GRIPPER] = 0.0
        if error.max() <= self.config.max_tracking_error_rad:
            self._tracking_since = None
            return
        if self._tracking_since is None:
            self._tracking_since = now_s
        elif now_s - self._tracking_since > self.config.tracking_time_s:
            worst = int(np.argmax(error))
            self.latch(f"tracking error {error[worst]:.3f} rad on {self.names[worst]!r} above "
                       f"{self.config.max_tracking_error_rad} rad for over {self.config.tracking_time_s} s")

    def on_read_failed(self, error: str) -> None:
        self.failed_reads += 1
        if self.failed_reads == self.config.max_failed_reads:
            self.latch(f"{self.failed_reads} reads failed in a row, the last: {error}")

    def on_status(self, statuses: list[ServoStatus]) -> None:
        flagged = [f"{s.name}: {', '.join(s.flags)}" for s in statuses if s.answered and s.error_bits]
        if flagged:
            self.latch(f"servo error flags ({'; '.join(flagged)})")

    # --- the filters ---------------------------------------------------------------------------------------
    def _hold(self, reason: str) -> Decision:
        self.holds[reason] += 1
        self.hold_reason = reason
        return Decision(None, reason)

    def filter(self, wanted: np.ndarray | None, measured: np.ndarray, held_reason: str = "") -> Decision:
        """The goal to write this tick for the executor's command `wanted` (None or `held_reason` when it
        holds), given the `measured` positions of this tick's read."""
        if self.state != "running":
            return self._hold(self.state if not self.faults else f"{self.state}: {self.faults[0]}")
        if wanted is None or held_reason:
            return self._hold(held_reason or "no command")
        wanted = np.asarray(wanted, float)
        if wanted.shape != self.lower.shape or not np.all(np.isfinite(wanted)):
            return self._hold(f"command not finite or of shape {wanted.shape}")
        clamped = {}
        goal = np.clip(wanted, self.lower, self.upper)
        clamped["range"] = int(np.count_nonzero(goal != wanted))
        step = self.config.max_step_rad
        bounded = np.clip(goal, self.last_goal - step, self.last_goal + step)
        clamped["velocity"] = int(np.count_nonzero(bounded != goal))
        reach = self.config.max_from_measured_rad
        final = np.clip(bounded, measured - reach, measured + reach)
        clamped["from_measured"] = int(np.count_nonzero(final != bounded))
        self.clamps.update({k: v for k, v in clamped.items() if v})
        self.last_goal = final
        self.hold_reason = ""
        return Decision(final.copy(), "", clamped)


@dataclass
class ChunkLedger:
    """Every chunk received is applied or rejected with a reason: received == applied + rejected."""

    received: int = 0
    applied: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    def receive(self) -> None:
        self.received += 1

    def apply(self) -> None:
        self.applied += 1

    def reject(self, reason: str) -> None:
        self.rejected[reason] += 1

    @property
    def balanced(self) -> bool:
        return self.received == self.applied + sum(self.rejected.values())
