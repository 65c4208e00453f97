"""The pick task: which objects stand where, which one is asked for, and how well the arm is doing.

`reset` samples the scene (act_node.tabletop.scene) and puts it in the world; then the task judges:
success is the requested object at least 5 cm above where it settled, held by both jaws; the dense
reward in [0, 1] gives 0.3 for closing in on the object, 0.2 for holding it and 0.5 for lifting it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from act_node.tabletop.robot import JAW_LINKS, Robot
from act_node.tabletop.scene import Scene, sample_scene
from act_node.tabletop.world import PlacedObject, World

if TYPE_CHECKING:  # the env hands a Selector in: the sim node, which has none, loads no torch
    from act_node.attention.selector import Selector

LIFT_SUCCESS_M = 0.05
REACH_SCALE_PER_M = 10.0  # the reach term is 1 - tanh(10 * distance): half at about 5 cm
REWARD_WEIGHTS = dict(reach=0.3, held=0.2, lift=0.5)


@dataclass(frozen=True)
class ObjectState:
    """An object as it stands now: kind, position (3,) metres and yaw (radians), table frame."""

    kind: str
    position: np.ndarray
    yaw: float
    height_m: float
    footprint_m: float


@dataclass(frozen=True)
class TargetChoice:
    """Where the policy is told the target is: (x, y) metres, how far that is from the truth, and whether the
    Selector found the requested kind (if not, the truth stands in and the miss is counted)."""

    xy: np.ndarray
    error_m: float
    selector_found: bool = True


class PickTask:
    def __init__(self, world: World, robot: Robot):
        self.world = world
        self.robot = robot
        self.scene: Scene | None = None
        self.start_heights: dict[str, float] = {}

    def sample(self, rng: np.random.Generator, objects: int, request: str | None = None) -> Scene:
        self.scene = sample_scene(rng, objects, request=request)
        return self.scene

    def place(self) -> None:
        """Put the sampled scene's objects in the world (after the robot: body ids follow build order)."""
        for placed in self.scene.objects:
            self.world.add_object(placed)

    def settled(self) -> None:
        """Call once the objects have settled: success is measured from these heights."""
        self.start_heights = {o.kind.name: self.world.body_pose(o.body)[0][2] for o in self.scene.objects}

    @property
    def task(self) -> str:
        return self.scene.task if self.scene else ""

    def object_states(self) -> list[ObjectState]:
        """Every object as it stands now."""
        states = []
        for placed in self.scene.objects:
            position, yaw = self.world.body_pose(placed.body)
            states.append(ObjectState(placed.kind.name, position, yaw, placed.kind.height_m, placed.kind.footprint_m))
        return states

    def target_pose(self) -> tuple[np.ndarray, float]:
        """The requested object's position (3,) and yaw now."""
        return self.world.body_pose(self.scene.target.body)

    def choose_target(self, selector: Selector | None, seen: list[tuple[str, float, float]] | None = None
                      ) -> TargetChoice:
        """The target (x, y) from the Selector over the objects where they stand now (as the sim node publishes
        them on scene/objects for the selector node: the graph's target and this one are the same numbers), or
        the truth when `selector` is None. `seen`: the Selector reads these (kind, x, y) instead, what the scene
        reader saw (scene:=cameras); a miss then leaves no target (NaN), as the graph's selector answers absent."""
        truth = self.scene.target.xy
        if selector is None:
            return TargetChoice(truth.copy(), 0.0)
        tokens = seen if seen is not None else [(o.kind, float(o.position[0]), float(o.position[1]))
                                                for o in self.object_states()]
        choice = selector.select(tokens, self.scene.request)
        if not choice.found and seen is not None:
            return TargetChoice(np.full(2, np.nan), math.inf, selector_found=False)
        if not choice.found:  # the kind is on the table by construction: a Selector miss, reported by the caller
            return TargetChoice(truth.copy(), math.inf, selector_found=False)
        selected = np.array(choice.target_xy)
        return TargetChoice(selected, float(np.hypot(*(selected - truth))))

    # --- judging ---------------------------------------------------------------------------------------
    def lift_m(self, placed: PlacedObject | None = None) -> float:
        """How far an object (default: the requested one) stands above where it settled, metres."""
        placed = placed or self.scene.target
        return float(self.world.body_pose(placed.body)[0][2] - self.start_heights[placed.kind.name])

    def held(self, placed: PlacedObject | None = None) -> bool:
        """Both jaws touch the object (default: the requested one)."""
        return all(self.robot.touches((placed or self.scene.target).body, jaw) for jaw in JAW_LINKS)

    def is_up(self, placed: PlacedObject | None = None) -> bool:
        """The object (default: the requested one) is lifted as success counts it: 5 cm up, held by both jaws."""
        return self.lift_m(placed) >= LIFT_SUCCESS_M and self.held(placed)

    def is_success(self) -> bool:
        return self.is_up()

    def lifted(self) -> list[str]:
        """The kinds of every object now up (`is_up`), the requested or not: a policy that picks a distractor
        shows here."""
        return [placed.kind.name for placed in self.scene.objects if self.is_up(placed)]

    def reward(self, success: bool) -> float:
        if success:
            return 1.0
        tcp, _ = self.robot.link_pose("tcp")
        position, _ = self.target_pose()
        grasp = np.array([position[0], position[1], self.scene.target.kind.grasp_height_m])
        reach = 1.0 - math.tanh(REACH_SCALE_PER_M * float(np.linalg.norm(tcp - grasp)))
        held = self.held()
        lift = min(max(self.lift_m(), 0.0) / LIFT_SUCCESS_M, 1.0) if held else 0.0
        return REWARD_WEIGHTS["reach"] * reach + REWARD_WEIGHTS["held"] * held + REWARD_WEIGHTS["lift"] * lift
