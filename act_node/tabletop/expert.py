"""A scripted expert: pick up the requested object with the target from the observation and the planner.

It acts like a policy: observation in, action (joint targets in LeRobot units) out, and it can answer
with a whole chunk of future actions. What it reads: the target (x, y) from `environment_state`, the
joint positions from `agent_pos`, and, privileged, the objects as they stand in the simulator (the
requested kind's yaw and its neighbours: the policy has to see those in the images). The plan itself is
act_node.tabletop.planner's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from act_node.tabletop.planner import plan_for_scene, plan_window

if TYPE_CHECKING:
    from act_node.tabletop.env import PickObjectEnv


class ScriptedExpert:
    """The planner as a policy over the env: `reset(observation)` after each env reset, then
    `act(observation)` each step (or `chunk(observation, n)` for the next n actions)."""

    def __init__(self, env: PickObjectEnv):
        self.env = env.unwrapped
        self.fps = self.env.fps
        self.plan: np.ndarray | None = None  # (steps, 6) LeRobot units
        self.step = 0

    def reset(self, observation: dict) -> None:
        """Plan from the observation (joints, target) and, privileged, the objects as they stand."""
        objects = self.env.object_poses()
        target_xy = observation["environment_state"][:2]  # then the request, one-hot: the scene's own here
        self.plan = plan_for_scene(observation["agent_pos"], target_xy, self.env.scene.request, objects, self.fps)
        self.step = 0

    def replan(self, observation: dict) -> None:
        """Plan again from the joints now and the requested object where it stands now (privileged: the
        observation's target is where it stood at reset, and a missed grasp may have moved it): the
        second attempt of act_lab.takeover."""
        objects = self.env.object_poses()
        target_xy = self.env.table.task.target_pose()[0][:2]
        self.plan = plan_for_scene(observation["agent_pos"], target_xy, self.env.scene.request, objects, self.fps)
        self.step = 0

    def act(self, observation: dict) -> np.ndarray:
        """The next action (6,) float32; after the plan ends, hold its last pose."""
        action = self.chunk(observation, 1)[0]
        self.step += 1
        return action

    def needs_observation(self) -> bool:
        """The plan is made once, at reset: no observation is read after it."""
        return False

    def chunk(self, observation: dict, size: int) -> np.ndarray:
        """The next `size` actions (size, 6) from the current step, without advancing."""
        return plan_window(self.plan, self.step, size)

    @property
    def plan_steps(self) -> int:
        return 0 if self.plan is None else len(self.plan)
