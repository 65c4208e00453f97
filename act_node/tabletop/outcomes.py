"""Why an episode ended, from the simulator's truth: one mode an episode, watched tick by tick.

    watch = OutcomeWatch(task, robot)          # TableTop owns one
    watch.reset()                              # after the scene settled
    watch.tick(command_rad)                    # after each control tick's physics (the command it was sent)
    mode = watch.mode(success, unplannable)    # at the episode's end: one of MODES

The facts watched (every one the simulator's, none a camera's or the policy's):
- reach: the closest the tool centre point (tcp) came to the requested object's grasp point (its centre, at its
  kind's grasp height, where it stands that tick), metres;
- closes: ticks the gripper was commanded closed (below CLOSING_LEROBOT), the tcp's closest to the grasp point
  on them, and whether one came near another object's grasp point instead;
- held: ticks both jaws touched the requested object, its highest lift while held, and whether it is held at the
  end;
- the other objects: whether both jaws held one (checked on closed ticks only), or one stood up as success counts
  it (LIFT_SUCCESS_M above where it settled and held by both jaws).

The modes, the first that applies (`classify`; docs/evaluation.md gives the same table):
  succeeded        the requested object 5 cm up and held by both jaws (act_node.tabletop.task) at the end
  unplannable      the expert found no plan for the scene; no step ran
  lifted_other     another object stood up (5 cm, held by both jaws) at some tick
  lifted_dropped   the requested object was held LIFTED_M (1 cm) or more up at some tick and is not held at the end
  held_not_lifted  both jaws held the requested object at some tick, and it never stood 5 cm up while held
  wrong_target     the jaws went for another object: both held one at some tick, or the gripper closed within
                   REACHED_M of another object's grasp point and never within REACHED_M of the requested one's
  missed_grasp     the gripper closed with the tcp within REACHED_M of the grasp point, and both jaws never held it
                   (the jaws closed beside or on top of it, or with one jaw on it: facts.jaws_on_it_closed says)
  hovered          the tcp came within REACHED_M of the grasp point and the gripper never closed there, to the step
                   limit
  never_reached    the tcp never came within REACHED_M of the requested object's grasp point
Every episode gets exactly one; they add up to the episodes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from act_node import so101
from act_node.tabletop.robot import JAW_LINKS, Robot
from act_node.tabletop.task import LIFT_SUCCESS_M, PickTask
from act_node.tabletop.world import PlacedObject

MODES = ("succeeded", "never_reached", "missed_grasp", "held_not_lifted", "lifted_dropped", "lifted_other",
         "wrong_target", "hovered", "unplannable", "target_not_seen")
MODE_TITLES = {"succeeded": "succeeded", "never_reached": "never reached the object",
               "missed_grasp": "closed off it (missed grasp)", "held_not_lifted": "held but not lifted",
               "lifted_dropped": "lifted and dropped", "lifted_other": "lifted another object",
               "wrong_target": "went for another object", "hovered": "hovered to the step limit",
               "unplannable": "unplannable",
               "target_not_seen": "the scene reader did not see the requested object (scene:=cameras)"}
# The gripper command (LeRobot's 0-100) below which the jaws are closing: every kind's open command is 30 or
# more (planner.gripper_opening_command: the pen 31, the ball 91) and the expert's close ramp goes to 0
CLOSING_LEROBOT = 10.0
CLOSING_RAD = float(so101.gripper_from_lerobot(CLOSING_LEROBOT))
# The tcp this near the grasp point has reached the object: the expert closes with it 1.5-3 cm away (the fixed
# jaw's face on the tcp, the object beside it; seeds 2100-2115, 4 objects), and a jaw standing on the object
# holds the tcp up to 3.5 cm higher (results/act_grasp/closure.py)
REACHED_M = 0.05
LIFTED_M = 0.01  # held this far up, then lost: dropped (a squeeze alone raises an object a few mm at most)


@dataclass
class OutcomeFacts:
    """What the watch saw over one episode (metres, ticks)."""

    closest_reach_m: float = float("inf")  # the tcp from the requested object's grasp point, at its closest
    closest_closed_reach_m: float = float("inf")  # ... on the ticks the gripper was commanded closed
    close_ticks: int = 0
    closed_near_other: bool = False  # closed with the tcp within REACHED_M of another's grasp point, not this one's
    jaws_on_it_closed: int = 0  # the most jaws (0-2) touching the requested object on a closed tick: 1 in a
    # missed grasp is a close with one jaw on the object and the other off it (or the object not pressed to it)
    held_ticks: int = 0  # both jaws on the requested object
    max_held_lift_m: float = 0.0  # its highest lift above where it settled, on those ticks
    held_at_end: bool = False
    held_other: bool = False  # both jaws on another object at some closed tick
    lifted_other: bool = False  # another object 5 cm up and held by both jaws at some tick

    def to_dict(self) -> dict:
        """JSON's: distances in mm-rounded metres, an infinity (no tick) as None."""
        values = asdict(self)
        for name in ("closest_reach_m", "closest_closed_reach_m", "max_held_lift_m"):
            values[name] = round(values[name], 4) if math.isfinite(values[name]) else None
        return values


def classify(success: bool, unplannable: bool, facts: OutcomeFacts) -> str:
    """The episode's one mode (see the module's table), the first that applies."""
    if success:
        return "succeeded"
    if unplannable:
        return "unplannable"
    if facts.lifted_other:
        return "lifted_other"
    if facts.held_ticks and facts.max_held_lift_m >= LIFTED_M and not facts.held_at_end:
        return "lifted_dropped"
    if facts.held_ticks:
        return "held_not_lifted"
    if facts.held_other or facts.closed_near_other and facts.closest_closed_reach_m > REACHED_M:
        return "wrong_target"
    if facts.closest_closed_reach_m <= REACHED_M:
        return "missed_grasp"
    if facts.closest_reach_m <= REACHED_M:
        return "hovered"
    return "never_reached"


class OutcomeWatch:
    """Watches the task tick by tick for `classify`: the tcp's pose and a contact query a tick, the other objects'
    poses each tick and their contacts only while the gripper is closed; no rendering."""

    def __init__(self, task: PickTask, robot: Robot):
        self.task, self.robot = task, robot
        self.facts = OutcomeFacts()

    def reset(self) -> None:
        self.facts = OutcomeFacts()

    def _grasp_point(self, placed: PlacedObject) -> np.ndarray:
        """An object's centre at its kind's grasp height, where it stands now (3,) metres."""
        position, _ = self.task.world.body_pose(placed.body)
        return np.array([position[0], position[1], placed.kind.grasp_height_m])

    def tick(self, command_rad: np.ndarray) -> None:
        """After a control tick's physics; `command_rad` (6,) is what the arm was sent."""
        facts, task = self.facts, self.task
        tcp, _ = self.robot.link_pose("tcp")
        target = task.scene.target
        others = [placed for placed in task.scene.objects if placed is not target]
        reach = float(np.linalg.norm(tcp - self._grasp_point(target)))
        facts.closest_reach_m = min(facts.closest_reach_m, reach)
        if float(command_rad[so101.GRIPPER]) < CLOSING_RAD:
            facts.close_ticks += 1
            facts.closest_closed_reach_m = min(facts.closest_closed_reach_m, reach)
            facts.closed_near_other = facts.closed_near_other or reach > REACHED_M and any(
                np.linalg.norm(tcp - self._grasp_point(other)) <= REACHED_M for other in others)
            facts.held_other = facts.held_other or any(task.held(other) for other in others)
            if facts.jaws_on_it_closed < 2:
                facts.jaws_on_it_closed = max(facts.jaws_on_it_closed, sum(
                    self.robot.touches(target.body, jaw) for jaw in JAW_LINKS))
        facts.held_at_end = task.held()
        if facts.held_at_end:
            facts.held_ticks += 1
            facts.max_held_lift_m = max(facts.max_held_lift_m, task.lift_m())
        if not facts.lifted_other:  # the lift first: contacts only for an object 5 cm up
            facts.lifted_other = any(task.lift_m(other) >= LIFT_SUCCESS_M and task.held(other) for other in others)

    def mode(self, success: bool, unplannable: bool = False) -> str:
        return classify(success, unplannable, self.facts)
