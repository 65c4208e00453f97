"""Why an episode ended (act_node.tabletop.outcomes): each mode made to happen in the simulator by an edited expert
plan, and the report's modes adding up to the episodes."""

import numpy as np
import pytest

from act_node.episodes import run_episode
from act_node.report import outcome_summary
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.kinematics import Unreachable
from act_node.tabletop.outcomes import MODES, OutcomeFacts, classify
from act_node.tabletop.planner import plan_for_scene


class PlanAgent:
    """The expert's plan for the requested object (or, `other`, for another one), moved by `shift` metres in the
    table frame and edited by `edit` (plan -> plan), replayed open loop; its last pose held."""

    def __init__(self, env, other=False, edit=None, shift=(0.0, 0.0)):
        self.env, self.other, self.edit, self.shift = env, other, edit, np.array(shift)

    def reset(self, observation):
        states = self.env.table.task.object_states()
        objects = [(o.kind, float(o.position[0]), float(o.position[1]), o.yaw) for o in states]
        pick = next(o for o in states if (o.kind != self.env.scene.request) == self.other)
        self.plan = plan_for_scene(observation["agent_pos"], pick.position[:2] + self.shift, pick.kind, objects,
                                   self.env.fps)
        self.plan = self.edit(self.plan) if self.edit else self.plan
        self.step = 0

    def act(self, observation):
        self.step += 1
        return self.plan[min(self.step - 1, len(self.plan) - 1)]

    def needs_observation(self):
        return False


def _closed_at(plan):
    return int(np.argmax(plan[:, 5] <= 0.0))  # the close ramp's end (the planner's CLOSED is 0)


def never_close(plan):
    plan = plan.copy()
    plan[:, 5] = np.maximum(plan[:, 5], 40.0)
    return plan


def stop_before_lift(plan):
    return plan[:_closed_at(plan) + 9]  # the close and the settle, then that pose held


def open_mid_lift(plan):
    kept = plan[:_closed_at(plan) + 19]  # 10 ticks into the lift: about 1.4 cm up, then the jaws open
    return np.vstack([kept, np.tile(np.append(kept[-1, :5], 60.0), (5, 1))])


def stay_home(plan):
    return plan[:1]


@pytest.fixture(scope="module")
def env():
    env = PickObjectEnv(objects=3, cameras=(), target_source="truth", max_steps=160)
    yield env
    env.close()


# (seed, agent settings, mode), each checked by eye on its frames (results/eval_outcomes/test_cases_frames.png:
# step 100 and the last, one row a case); seed 7 asks for the cube, 6 for the pen
CASES = [
    (7, {}, "succeeded"),
    (7, {"edit": never_close}, "hovered"),
    (7, {"edit": open_mid_lift}, "lifted_dropped"),
    (7, {"other": True}, "lifted_other"),
    (7, {"other": True, "edit": stop_before_lift}, "wrong_target"),
    (7, {"edit": stay_home}, "never_reached"),
    (7, {"shift": (0.07, 0.0)}, "never_reached"),
    (6, {"edit": stop_before_lift}, "held_not_lifted"),
    (6, {"shift": (0.0, 0.04)}, "missed_grasp"),
]


@pytest.mark.parametrize("seed, settings, mode", CASES)
def test_each_mode_is_judged_from_the_simulator(env, seed, settings, mode):
    result = run_episode(env, PlanAgent(env, **settings), seed)
    assert result.outcome == mode, result.outcome_facts
    assert result.success == (mode == "succeeded")


def test_an_unplannable_scene_is_its_own_mode(env):
    class Refuses(PlanAgent):
        def reset(self, observation):
            raise Unreachable("nowhere to stand")

    result = run_episode(env, Refuses(env), 7)
    assert result.outcome == "unplannable" and result.steps == 0


def test_the_first_mode_that_applies_wins():
    held_and_other = OutcomeFacts(closest_reach_m=0.02, closest_closed_reach_m=0.02, close_ticks=5, held_ticks=3,
                                  lifted_other=True)
    assert classify(False, False, held_and_other) == "lifted_other"
    assert classify(True, False, held_and_other) == "succeeded"
    dropped = OutcomeFacts(closest_reach_m=0.02, closest_closed_reach_m=0.02, close_ticks=5, held_ticks=3,
                           max_held_lift_m=0.015, held_at_end=False)
    assert classify(False, False, dropped) == "lifted_dropped"
    dropped.held_at_end = True  # still held at 1.5 cm when the time ran out: not dropped
    assert classify(False, False, dropped) == "held_not_lifted"
    near_both = OutcomeFacts(closest_reach_m=0.03, closest_closed_reach_m=0.03, close_ticks=5, closed_near_other=True)
    assert classify(False, False, near_both) == "missed_grasp"  # it closed near the requested one too
    assert classify(False, False, OutcomeFacts()) == "never_reached"


def test_the_modes_add_up_to_the_episodes_overall_and_by_kind():
    episodes = [{"seed": s, "task": f"pick up the {kind}", "success": mode == "succeeded", "outcome": mode}
                for s, (kind, mode) in enumerate([("cup", "succeeded"), ("cup", "missed_grasp"), ("pen", "hovered"),
                                                  ("pen", "missed_grasp"), ("key", "never_reached")])]
    summary = outcome_summary(episodes)
    assert set(summary["outcomes"]) == set(MODES)
    assert sum(row["count"] for row in summary["outcomes"].values()) == 5
    assert summary["outcomes"]["missed_grasp"]["count"] == 2
    low, high = summary["outcomes"]["missed_grasp"]["ci95"]
    assert low < 0.4 < high
    for row in summary["by_kind"].values():
        assert sum(m["count"] for m in row["outcomes"].values()) == row["episodes"]
    assert summary["by_kind"]["cup"]["success"]["count"] == 1
    assert outcome_summary(episodes[:2] + [{**episodes[2], "outcome": None}]) is None  # an older record: no modes
