"""Smooth random joint offsets: the arm pushed off the expert's plan and let back onto it.

Knots every `knot_ticks` control ticks, each zero with `zero_share` (the arm goes back to the plan there) or
normal with the given standard deviations per joint (degrees; the gripper in its 0-100 units), linear in between.
The encoder's frames (act_lab.vision.frames) use them to show the cameras off-plan views; `act-lab record
--action-noise` uses them for demonstrations that show recoveries: the offsets are added to the actions the
arm executes while the dataset keeps the expert's clean action, so the frames after a push pair a state off the
plan with the action that leads back to it (DART, Laskey et al. 2017). The plan's actions are joint targets
along a path fixed at reset, so the clean action from a pushed state is the way back to the path.
"""

from __future__ import annotations

import math

import numpy as np

KNOT_TICKS = 15
ZERO_KNOT_SHARE = 0.4
# per joint: shoulder_pan, shoulder_lift, elbow_flex, wrist_flex, wrist_roll (degrees), gripper (0-100)
RECOVERY_STD = np.array([4.0, 3.0, 3.0, 4.0, 12.0, 0.0])  # act-lab record --action-noise 1: the gripper as planned


def smooth_offsets(rng: np.random.Generator, ticks: int, std: np.ndarray, knot_ticks: int = KNOT_TICKS,
                   zero_share: float = ZERO_KNOT_SHARE) -> np.ndarray:
    """(ticks, len(std)) offsets, piecewise linear between random knots."""
    knots = math.ceil(ticks / knot_ticks) + 1
    values = rng.normal(0.0, std, (knots, len(std))) * (rng.random((knots, 1)) >= zero_share)
    at = np.arange(ticks) / knot_ticks
    return np.stack([np.interp(at, np.arange(knots), values[:, j]) for j in range(len(std))], axis=1)


CLOSING_DROP = 5.0  # gripper units below the widest command so far: the plan's jaws are closing
QUIET_TICKS = 20  # the pushes are over this long before the plan closes the jaws: the arm is back on the plan
RELEASE_TICKS = 10  # over which the offsets fade to zero before that


def closing_tick(plan: np.ndarray) -> int:
    """The first tick of a plan (ticks, 6) whose gripper command is CLOSING_DROP below its widest before it;
    len(plan) when it never closes."""
    gripper = np.asarray(plan)[:, -1]
    closing = np.flatnonzero(gripper < np.maximum.accumulate(gripper) - CLOSING_DROP)
    return int(closing[0]) if len(closing) else len(gripper)


class ActionNoise:
    """`noise(tick, action)`: the action the arm executes at `tick`, the clean one plus the episode's offsets
    (`scale` times RECOVERY_STD, drawn from `seed`). `plan()` gives the expert's plan once the episode has begun:
    the pushes fade out over RELEASE_TICKS and are over QUIET_TICKS before the plan closes the jaws, so the arm
    is pushed on its way to the object and comes back onto the plan for the grasp (a push at the grasp knocks
    the object, and the plan, made at reset, does not follow it)."""

    def __init__(self, scale: float, seed: int, plan=None, ticks: int = 1_000):
        if not (math.isfinite(scale) and scale >= 0):
            raise ValueError(f"action noise scale must be a finite number >= 0, got {scale}")
        self.scale = scale
        self.offsets = smooth_offsets(np.random.default_rng(seed), ticks, RECOVERY_STD * scale).astype(np.float32)
        self.plan = plan
        self.quiet_from: int | None = None  # the tick from which the offsets are zero

    def __call__(self, tick: int, action: np.ndarray) -> np.ndarray:
        if self.scale == 0:
            return action
        if self.quiet_from is None:
            plan = self.plan() if self.plan is not None else None
            self.quiet_from = len(self.offsets) if plan is None else max(0, closing_tick(plan) - QUIET_TICKS)
        if tick >= self.quiet_from:
            return action
        share = min(1.0, (self.quiet_from - tick) / RELEASE_TICKS)
        return action + share * self.offsets[tick]
