"""Executing action chunks: a time-indexed queue, latency alignment, merge rules and safety limits.

A chunk answers one observation: step k is meant for the observation's time + k / fps. The executor
keeps one slot per control tick (tick = round(time * fps)). When a chunk arrives, steps whose time has
passed are dropped (latency alignment) and the rest merge with what is queued:

  replace    the new chunk's steps replace the queued ones from its first step on
  average    queued and new steps are averaged with weight `new_weight` on the new one
  ensemble   ACT's temporal ensembling: every prediction for a tick is kept in a weighted mean, the
             i-th prediction for that tick weighted exp(-coeff * i) (older predictions count more), updated
             online as LeRobot's ACTTemporalEnsembler does (mean * W[i-1] + action * w[i]) / W[i], W the running
             sum of the weights: given LeRobot's own float32 weights (`ensemble_weights`) and float32 chunks, the
             same arithmetic to the bit

Before a command leaves: hold the last command when the newest chunk is older than `stale_after_s`
or no step is queued for this tick, clamp to the joint ranges, and bound each joint's change per tick
by `max_velocity` / fps. Units are the caller's (radians on ROS topics).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


def checked_ensemble_coeff(value) -> float:
    """`value` as a float; ValueError naming --temporal-ensemble-coeff when it is not a finite number."""
    if not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise ValueError(f"--temporal-ensemble-coeff must be a finite number, got {value!r}")
    return float(value)


MERGE_RULES = ("replace", "average", "ensemble")
ENSEMBLE_COEFF = 0.01  # ACT's temporal_ensemble_coeff (the paper's, LeRobot's suggested value)
# Where an arm's commands come from: chunks on act/action_chunk (a policy, the expert) or a leader arm's joint
# states (a person teleoperating), each through the same executor and safety chain
COMMAND_SOURCES = ("policy", "leader")
LEADER_HOLD_S = 0.25  # a leader's pose is followed this long after its message; then the arm holds


@dataclass
class Chunk:
    """Actions (steps, joints) for the ticks starting at `stamp_s` (seconds, the observation's time)."""

    stamp_s: float
    actions: np.ndarray


def hold_chunk(positions: np.ndarray, stamp_s: float, fps: float, hold_s: float = LEADER_HOLD_S) -> Chunk:
    """A leader's pose (joints,) as a chunk that asks for it from `stamp_s` for `hold_s`: each new pose
    replaces the last (merge "replace"), and a leader that goes silent runs the queue out, so the arm holds
    ("no step queued") instead of following a pose that is no longer meant."""
    steps = max(1, math.ceil(hold_s * fps))
    return Chunk(stamp_s, np.tile(np.asarray(positions, float), (steps, 1)))


@dataclass
class Command:
    """What the executor sends this tick, and why."""

    positions: np.ndarray
    held: bool  # no usable step: the previous command is repeated
    reason: str = ""  # "", "no step queued", "chunk stale"
    clamped: int = 0  # joints pulled back into range or under the velocity bound


@dataclass
class _Slot:
    mean: np.ndarray  # the merged action for the tick
    count: int = 1  # predictions merged into it


@dataclass
class ChunkExecutor:
    fps: float
    lower: np.ndarray
    upper: np.ndarray
    max_velocity: np.ndarray | float
    merge: str = "replace"
    new_weight: float = 0.5
    ensemble_coeff: float = ENSEMBLE_COEFF
    stale_after_s: float = 1.0
    # ensemble: the i-th prediction's weight, i = 0, 1, ... (None: exp(-ensemble_coeff * i) in float64)
    ensemble_weights: np.ndarray | None = None
    _slots: dict[int, _Slot] = field(default_factory=dict, init=False)
    _newest_stamp_s: float = field(default=-math.inf, init=False)
    _last: np.ndarray | None = field(default=None, init=False)
    _merged: tuple[float, np.ndarray] | None = field(default=None, init=False)  # the last chunk merged
    _sums: tuple | None = field(default=None, init=False)  # (what they are for, weights, their running sums)

    def __post_init__(self):
        if self.merge not in MERGE_RULES:
            raise ValueError(f"merge rule must be one of {MERGE_RULES}, got {self.merge!r}")
        if self.fps <= 0:
            raise ValueError(f"fps must be positive, got {self.fps}")
        if not math.isfinite(self.ensemble_coeff):
            raise ValueError(f"ensemble_coeff must be finite, got {self.ensemble_coeff}")
        if not 0.0 < self.new_weight <= 1.0:
            raise ValueError(f"new_weight must be in (0, 1], got {self.new_weight}")
        self.lower, self.upper = np.asarray(self.lower, float), np.asarray(self.upper, float)
        self.max_velocity = np.broadcast_to(np.asarray(self.max_velocity, float), self.lower.shape).copy()

    def tick(self, time_s: float) -> int:
        return int(round(time_s * self.fps))

    def reset(self, positions: np.ndarray | None = None) -> None:
        """Forget every queued step; hold `positions` until a chunk arrives."""
        self._slots.clear()
        self._newest_stamp_s = -math.inf
        self._merged = None
        self._last = None if positions is None else np.asarray(positions, float).copy()

    @property
    def newest_stamp_s(self) -> float:
        return self._newest_stamp_s

    def queued_ticks(self) -> list[int]:
        return sorted(self._slots)

    def has_step(self, time_s: float) -> bool:
        return self.tick(time_s) in self._slots

    def add(self, chunk: Chunk, now_s: float) -> int:
        """Merge a chunk; returns how many of its steps were dropped as already past."""
        actions = np.asarray(chunk.actions)
        actions = actions if np.issubdtype(actions.dtype, np.floating) else actions.astype(float)
        if actions.ndim != 2 or actions.shape[0] == 0 or actions.shape[1] != self.lower.shape[0]:
            raise ValueError(f"chunk must be (steps >= 1, {self.lower.shape[0]}), got {actions.shape}")
        if not np.all(np.isfinite(actions)):
            raise ValueError("chunk holds NaN or inf")
        if self._merged is not None and self._merged[0] == chunk.stamp_s and np.array_equal(self._merged[1], actions):
            return 0  # the same chunk again (a policy says it again to a re-sent observation): merged once
        self._merged = (chunk.stamp_s, actions)
        first, now = self.tick(chunk.stamp_s), self.tick(now_s)
        skip = max(0, now - first)
        if self.merge == "replace":
            for tick in [t for t in self._slots if t >= first + skip]:
                del self._slots[tick]
        for k in range(skip, len(actions)):
            tick, action = first + k, actions[k]
            slot = self._slots.get(tick)
            if slot is None or self.merge == "replace":
                self._slots[tick] = _Slot(action.copy())
            elif self.merge == "average":
                self._slots[tick] = _Slot((1 - self.new_weight) * slot.mean + self.new_weight * action)
            else:  # ensemble: the c-th prediction for this tick weighs w[c], in LeRobot's order of operations
                weight, before, after = self._ensemble_weights(slot.count)
                slot.mean = (slot.mean * before + action * weight) / after
                slot.count += 1
        self._newest_stamp_s = max(self._newest_stamp_s, chunk.stamp_s)
        for tick in [t for t in self._slots if t < now]:
            del self._slots[tick]
        return min(skip, len(actions))

    def _ensemble_weights(self, count: int) -> tuple:
        """(w[count], W[count - 1], W[count]): the count-th prediction's weight and the running sums of the weights
        before and with it (summed in float64, then in the weights' dtype, as torch.cumsum sums float32)."""
        given = self.ensemble_weights
        if given is not None:
            if len(given) <= count:
                raise ValueError(f"ensemble_weights holds {len(given)} weights, a tick has {count + 1} predictions")
            if self._sums is None or self._sums[0] is not given:
                self._sums = (given, given, np.cumsum(given.astype(np.float64)).astype(given.dtype))
        elif self._sums is None or self._sums[0] != ("coeff", self.ensemble_coeff) or len(self._sums[1]) <= count:
            weights = np.exp(-self.ensemble_coeff * np.arange(max(count + 1, 128)))  # ensemble_coeff may change
            self._sums = (("coeff", self.ensemble_coeff), weights, np.cumsum(weights))
        _, weights, sums = self._sums
        return weights[count], sums[count - 1], sums[count]

    def next_command(self, now_s: float, measured: np.ndarray) -> Command:
        """The command for the tick at `now_s`; `measured` joint positions seed the hold at the start."""
        if self._last is None:
            self._last = np.asarray(measured, float).copy()
        tick = self.tick(now_s)
        for old in [t for t in self._slots if t < tick]:
            del self._slots[old]
        slot = self._slots.pop(tick, None)
        if now_s - self._newest_stamp_s > self.stale_after_s:
            return Command(self._last.copy(), True, "chunk stale")
        if slot is None:
            return Command(self._last.copy(), True, "no step queued")
        wanted = slot.mean
        limited = np.clip(wanted, self.lower, self.upper)
        step = self.max_velocity / self.fps
        limited = np.clip(limited, self._last - step, self._last + step)
        clamped = int(np.count_nonzero(~np.isclose(limited, wanted)))
        self._last = limited
        return Command(limited.copy(), False, "", clamped)
