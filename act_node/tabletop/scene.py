"""Scenes: which objects stand where, and which one is asked for. Seeded: one seed, one scene.

Objects stand in the arm's reach: a half ring in front of its base, 0.12-0.26 m from the pan axis and
within 75 degrees of straight ahead (the top-down grasp's workspace; see kinematics.py), and only where
the expert's planner finds a grasp of that kind at that yaw whose every pose is in reach
(planner.can_grasp), so that every seed can be planned. Footprints do not overlap and leave 3 cm between
them, room for a jaw. (With the planner as it is, the check has turned no placement away in 10,000
seeds with 4 objects and 2,000 each with 1, 2 and 8, so those seeds give the scenes they gave before it.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from act_node.observation import TASK_PREFIX
from act_node.tabletop import objects as object_kinds
from act_node.tabletop.kinematics import Unreachable
from act_node.tabletop.planner import Neighbour, can_grasp, plan_pick
from act_node.tabletop.world import ARM_BASE_XY, ARM_BASE_YAW, PlacedObject

REACH_M = (0.12, 0.26)
BEARING_RAD = math.radians(75)
GAP_M = 0.03
MAX_TRIES = 500
MAX_LAYOUTS = 50


@dataclass
class Scene:
    objects: list[PlacedObject]
    request: str  # the kind to pick up

    @property
    def target(self) -> PlacedObject:
        return next(o for o in self.objects if o.kind.name == self.request)

    @property
    def task(self) -> str:
        return TASK_PREFIX + self.request


def in_reach(xy: np.ndarray) -> bool:
    d = np.asarray(xy) - ARM_BASE_XY
    bearing = math.atan2(d[1], d[0]) - ARM_BASE_YAW
    return REACH_M[0] <= float(np.hypot(*d)) <= REACH_M[1] and abs(bearing) <= BEARING_RAD


def sample_scene(rng: np.random.Generator, count: int, request: str | None = None,
                 kinds: list[str] | None = None) -> Scene:
    """`count` objects of distinct kinds (drawn, or `kinds`), placed at random in reach; the request is
    drawn from them unless named."""
    names = list(object_kinds.KINDS)
    if not 1 <= count <= len(names):
        raise ValueError(f"object count must be 1..{len(names)}, got {count}")
    if kinds is None:
        kinds = list(rng.permutation(names)[:count])
        if request is not None and request not in kinds:
            object_kinds.kind(request)  # unknown kinds get their own error
            kinds[int(rng.integers(count))] = request
    if len(set(kinds)) != len(kinds) or len(kinds) != count:
        raise ValueError(f"need {count} distinct kinds, got {kinds}")
    request = request if request is not None else str(rng.choice(kinds))
    if request not in kinds:
        raise ValueError(f"requested kind {request!r} is not among the scene's kinds {kinds}")
    for _ in range(MAX_LAYOUTS):  # a crowded table can paint itself into a corner: start over
        placed = _place(rng, kinds)
        if placed is not None:
            return Scene(placed, request)
    raise RuntimeError(f"could not place {kinds} apart in reach after {MAX_LAYOUTS} layouts")


def _place(rng: np.random.Generator, kinds: list[str]) -> list[PlacedObject] | None:
    placed: list[PlacedObject] = []
    for name in sorted(kinds, key=lambda k: -object_kinds.kind(k).footprint_m):  # largest first: fewer retries
        kind = object_kinds.kind(name)
        for _ in range(MAX_TRIES):
            radius = math.sqrt(rng.uniform(REACH_M[0] ** 2, REACH_M[1] ** 2))  # uniform over the ring's area
            bearing = ARM_BASE_YAW + rng.uniform(-BEARING_RAD, BEARING_RAD)
            xy = ARM_BASE_XY + radius * np.array([math.cos(bearing), math.sin(bearing)])
            if all(np.hypot(*(xy - other.xy)) >= kind.footprint_m + other.kind.footprint_m + GAP_M
                   for other in placed):
                yaw = float(rng.uniform(-math.pi, math.pi))
                if can_grasp(kind, xy, yaw):
                    placed.append(PlacedObject(kind, xy, yaw))
                    break
        else:
            return None
    return placed


def scene_plan_failure(scene: Scene, start: np.ndarray, fps: float) -> str | None:
    """Why the expert cannot plan the pick of `scene`'s target from the joints `start` (6,), LeRobot units,
    at the target's true place and yaw; None when it can."""
    target = scene.target
    neighbours = [Neighbour(o.xy, o.kind.footprint_m) for o in scene.objects if o is not target]
    try:
        plan_pick(start, target.xy, target.kind, target.yaw, neighbours, fps)
    except Unreachable as error:
        return str(error)
    return None
