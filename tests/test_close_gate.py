"""act_lab/studies/close_gate.py: the jaws are held where they are while the tool is above the requested kind's
grasp height, read from the policy's own observation, and the rule lets go once the tool has come down."""

from __future__ import annotations

import numpy as np
import pytest

from act_lab.studies.close_gate import GRIPPER, came_down, gated, grasp_tcp_z, with_gate
from act_node.observation import environment_state

LAYOUT = "target_tool_yaw"


def observation(kind: str, tcp_z: float, jaws: float) -> dict:
    joints = np.array([0, 0, 0, 0, 0, jaws], dtype=np.float32)
    state = environment_state(np.array([0.2, 0.1]), kind, np.array([0.2, 0.1, tcp_z]), LAYOUT, np.array([1.0, 0.0]))
    return {"agent_pos": joints, "environment_state": state}


def test_a_close_above_the_grasp_height_is_held_and_an_opening_passes():
    high, low = grasp_tcp_z("pen") + 0.05, grasp_tcp_z("pen") + 0.005
    closing = np.array([1, 2, 3, 4, 5, 10.0])
    action, held = gated(closing, observation("pen", high, 40.0), LAYOUT)
    assert held and action[GRIPPER] == pytest.approx(40.0) and np.array_equal(action[:GRIPPER], closing[:GRIPPER])
    action, held = gated(closing, observation("pen", low, 40.0), LAYOUT)
    assert not held and action[GRIPPER] == 10.0
    action, held = gated(np.array([0, 0, 0, 0, 0, 60.0]), observation("pen", high, 40.0), LAYOUT)
    assert not held and action[GRIPPER] == 60.0
    # the kind is the request's: a can's grasp height is higher than a pen's
    assert came_down(observation("can", grasp_tcp_z("can"), 40.0), LAYOUT)
    assert not came_down(observation("pen", grasp_tcp_z("can"), 40.0), LAYOUT)


class Table:
    """Stands in for PickObjectEnv's reset/observe/act, replaying given observations (the rule is what is tested)."""

    environment_layout = LAYOUT

    def __init__(self, observations):
        self.observations, self.sent = list(observations), []

    def reset(self, seed=None):
        return self.observations.pop(0), {}

    def observe(self, render=True):
        return self.observations.pop(0)

    def act(self, action):
        self.sent.append(np.asarray(action))
        return 0.0, False, False, {}


def test_the_rule_lets_go_once_the_tool_has_come_down():
    z = grasp_tcp_z("key")
    table = with_gate(Table([observation("key", z + 0.04, 50.0), observation("key", z, 50.0),
                             observation("key", z + 0.04, 30.0), observation("key", z + 0.06, 20.0)]), 0.015)
    table.reset(seed=0)
    for _ in range(3):
        table.step(np.array([0, 0, 0, 0, 0, 5.0]))
    assert [a[GRIPPER] for a in table.sent] == [50.0, 5.0, 5.0]  # held high, then closes, and goes on closing
    assert table.gated_ticks == 1
