"""The grasp the expert would choose, as four numbers an episode: environment_state's "target_tool_yaw_grasp" layout.

The expert takes an object by one of several grasps: the closing directions its symmetry allows (a pen two, half a
turn apart; a cube four), the fixed jaw on either side, ordered by the room each leaves from the other objects
(act_node.tabletop.planner.plan_pick). The requested object's yaw by its symmetry, (cos k*yaw, sin k*yaw), names
none of them, and the wrist roll the expert turns to jumps half a turn where the order changes: a policy given the
yaw alone comes down between two of the expert's grasps (results/act_grasp_choice). This layout gives it the one
the planner chooses for the scene:

    grasp_cos_roll, grasp_sin_roll                          the wrist roll at the close
    grasp_tcp_minus_target_x, grasp_tcp_minus_target_y      the tool centre point at the close minus the target
                                                             (table frame, metres; forward kinematics of the joints)

In a recorded demonstration they are read off the episode's own actions at its close (`grasp_of_actions`): what the
demonstrator did. At run time they are planned once, at the episode's first observation (`planned_grasp`), from
the joints, the Selector's target and the objects: the simulator's with scene:=sim, the scene reader's with
scene:=cameras, and where no scene is read (an arm that takes a clicked target) the requested object alone, at
the target, lying as the yaw reader read it. The env takes `planned_grasp` as its `grasp_planner` (act_node.envs
gives it), as it takes the yaw reader: the table-top does not import what stands on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from act_node import so101
from act_node.table_frame import GRASP_NAMES


@dataclass(frozen=True)
class Grasp:
    """The four numbers (GRASP_NAMES) and how they were had: "scene" (planned among the objects), "target alone"
    (no scene, or the scene read no one object of the requested kind: planned from the target and the yaw), or
    "none" (nothing reachable: zeros, and `why`)."""

    numbers: np.ndarray
    source: str
    why: str = ""


def grasp_of_actions(actions: np.ndarray, target_xy) -> np.ndarray:
    """(4,) float32: the grasp of a pick whose joint targets (ticks, 6, LeRobot units) are `actions`, at its close
    (the first tick the gripper command falls from its widest: act_node.tabletop.perturb.closing_tick; the last
    tick when it never does): cos and sin of the wrist roll, the tool centre point minus `target_xy` (table
    frame)."""
    from act_node.description import tool_point
    from act_node.tabletop.perturb import closing_tick

    actions = np.asarray(actions, dtype=np.float64)
    if actions.ndim != 2 or actions.shape[1] != 6 or not len(actions):
        raise ValueError(f"actions must be (ticks, 6) joint targets in LeRobot units, got shape {actions.shape}")
    joints = so101.from_lerobot(actions[min(closing_tick(actions), len(actions) - 1)])
    tcp = tool_point(joints)
    roll = float(joints[4])
    return np.array([math.cos(roll), math.sin(roll), tcp[0] - target_xy[0], tcp[1] - target_xy[1]], np.float32)


def yaw_of(request: str, yaw_numbers) -> float:
    """A yaw of the requested object from the yaw reader's (cos k*yaw, sin k*yaw): one of the k alike (the planner
    takes any of them the same); 0 for a round kind."""
    from act_node.perception.yaw import kind_turns

    turns = kind_turns(request)
    if turns == 0 or yaw_numbers is None:
        return 0.0
    cos_k, sin_k = (float(v) for v in np.asarray(yaw_numbers, dtype=np.float64).reshape(-1)[:2])
    return math.atan2(sin_k, cos_k) / turns


def planned_grasp(start: np.ndarray, target_xy, request: str, objects: list[tuple[str, float, float, float]] | None,
                  fps: float, yaw_numbers=None) -> Grasp:
    """The grasp the expert's planner chooses from the joints at `start` (6,), LeRobot units, for the target at
    `target_xy` of kind `request` among `objects` [(kind, x, y, yaw)] (table frame). With `objects` None, or
    holding no one object of that kind (a scene reader that missed it), the requested object alone stands at the
    target, lying as `yaw_numbers` (the yaw reader's) say, among the other objects. When nothing is reachable: zeros,
    source "none", as the expert would fail too."""
    from act_node.tabletop.kinematics import Unreachable
    from act_node.tabletop.planner import plan_for_scene

    target = np.asarray(target_xy, dtype=np.float64).reshape(-1)
    if target.shape != (2,) or not np.all(np.isfinite(target)):
        raise ValueError(f"the target must be two finite numbers (x, y), got {target_xy!r}")
    scene = list(objects or [])
    source = "scene"
    if objects is None or sum(kind == request for kind, *_ in scene) != 1:
        source = "target alone"
        scene = [o for o in scene if o[0] != request] + [(request, target[0], target[1], yaw_of(request,
                                                                                                  yaw_numbers))]
    try:
        plan = plan_for_scene(np.asarray(start, dtype=np.float64), target, request, scene, fps)
    except Unreachable as error:
        return Grasp(np.zeros(len(GRASP_NAMES), np.float32), "none", f"no reachable grasp of the {request}: {error}")
    return Grasp(grasp_of_actions(plan, target), source)
