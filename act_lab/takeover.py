"""Second attempts: a policy acts, and where it misses, the expert takes over from where the arm stands.

The expert's demonstrations are made from reset: none of them shows what to do after a missed grasp, and the
policy's failures are missed grasps followed by hovering (results/act_cameras). `act-lab record --takeover-from
CHECKPOINT` records the states the policy itself reaches, the way HG-DAgger does (Kelly et al. 2019): the
checkpoint acts from reset, as `act-sim eval` runs it; at the first sign that it has gone wrong the expert
takes over, plans again from the joints and the objects as they stand then, and acts to the end. Only the
expert's part is recorded, so every frame's action is the expert's, from a state the policy led to.

When the expert takes over (the simulator's truth, as the expert's plan reads it):
  - a missed grasp: the policy's gripper command closed (perturb.CLOSING_DROP below its widest so far) and
    stayed closed, and MISS_S later the requested object is not held by both jaws LIFT_PROGRESS_M up (jaws that
    open again restart the count: a twitch, or the policy trying once more by itself);
  - or the policy has not succeeded by `latest_tick` (it hovers, or goes somewhere else).
A policy that succeeds before either is never taken over, not even if it drops the object after the success: the
episode has no expert part and is not recorded.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from act_node.table_frame import environment_state_names
from act_node.tabletop.perturb import CLOSING_DROP
from act_node.tabletop.planner import CLOSE_S, DESCEND_S, LIFT_S, SETTLE_S, SWING_S

if TYPE_CHECKING:
    from act_node.episodes import Agent
    from act_node.tabletop.env import PickObjectEnv
    from act_node.tabletop.expert import ScriptedExpert

MISS_S = 1.5  # after the jaws begin to close: the expert's own plan is 7 cm up by then (close, settle, lift)
LIFT_PROGRESS_M = 0.02  # held this high, the grasp is working
LATEST_S = 5.0  # not up by then: the expert takes over anyway
PLAN_S = SWING_S + DESCEND_S + CLOSE_S + SETTLE_S + LIFT_S  # the expert's plan, 4.2 s: what a takeover must leave it


class TakeoverAgent:
    """`policy` (an episodes.Agent: a ChunkAgent) from reset, then `expert` from the tick it takes over
    (`took_over_at`, None while the policy acts). `expert_acting` says who chose the last action."""

    def __init__(self, env: PickObjectEnv, policy: Agent, expert: ScriptedExpert, latest_tick: int | None = None,
                 miss_ticks: int | None = None):
        self.env = env.unwrapped
        self.policy, self.expert = policy, expert
        self.latest_tick = round(LATEST_S * self.env.fps) if latest_tick is None else int(latest_tick)
        self.miss_ticks = round(MISS_S * self.env.fps) if miss_ticks is None else int(miss_ticks)
        if self.latest_tick < 1 or self.miss_ticks < 1:
            raise ValueError(f"takeover ticks must be >= 1, got latest {self.latest_tick}, miss {self.miss_ticks}")
        self.reset_counters()

    def reset_counters(self) -> None:
        self.tick = 0
        self.took_over_at: int | None = None
        self.reason: str | None = None
        self.expert_acting = False
        self.widest_gripper = -np.inf
        self.closed_at: int | None = None
        self.succeeded = False

    @property
    def calls(self) -> int:
        return getattr(self.policy, "calls", 0)

    @property
    def inference_s(self) -> float:
        return getattr(self.policy, "inference_s", 0.0)

    def reset(self, observation: dict) -> None:
        self.reset_counters()
        self.policy.reset(observation)

    def needs_observation(self) -> bool:
        return True  # the expert may take over at any tick, and it plans from the observation

    def act(self, observation: dict | None) -> np.ndarray:
        if self.took_over_at is None:
            reason = self.gone_wrong()
            if reason is not None:
                self.expert.replan(observation)
                self.took_over_at, self.reason = self.tick, reason
        self.expert_acting = self.took_over_at is not None
        action = self.expert.act(observation) if self.expert_acting else self.policy.act(observation)
        if not self.expert_acting:
            self.note_gripper(float(action[-1]))
        self.tick += 1
        return action

    def note_gripper(self, command: float) -> None:
        """The policy's gripper command this tick: when it first closes (as perturb.closing_tick reads a plan)."""
        self.widest_gripper = max(self.widest_gripper, command)
        if command >= self.widest_gripper - CLOSING_DROP:
            self.closed_at = None  # open (again): a twitch, or a policy trying once more by itself
        elif self.closed_at is None:
            self.closed_at = self.tick

    def gone_wrong(self) -> str | None:
        """Why the expert takes over now ("missed grasp", "too slow"), or None."""
        task = self.env.table.task
        self.succeeded = self.succeeded or task.is_success()
        if self.succeeded:  # the policy's own success (and its frames after it): nothing to take over
            return None
        if self.tick >= self.latest_tick:
            return "too slow"
        if self.closed_at is not None and self.tick - self.closed_at >= self.miss_ticks:
            if not (task.held() and task.lift_m() >= LIFT_PROGRESS_M):
                return "missed grasp"
        return None


class Takeover:
    """What `act_node.record.record(takeover=...)` needs: the checkpoint that acts first (an act_node.policy
    .ChunkPolicy, run with its own n_action_steps), where it came from, and the latest tick to take over at."""

    def __init__(self, policy, source: str, latest_tick: int | None = None):
        self.policy, self.source, self.latest_tick = policy, str(source), latest_tick

    @classmethod
    def load(cls, checkpoint: str | Path, env: PickObjectEnv, latest_s: float = LATEST_S) -> Takeover:
        """The checkpoint, checked against what the env feeds it: its cameras must be the env's (a checkpoint that
        takes no images is fed none); act_node.policy.CheckpointMismatch or FileNotFoundError say what is wrong."""
        from act_node.checkpoints import readable_checkpoint_cameras
        from act_node.policy import ChunkPolicy, FeatureSpec

        env = env.unwrapped
        if not (math.isfinite(latest_s) and latest_s > 0):
            raise ValueError(f"the latest takeover must be a time > 0 s, got {latest_s}")
        latest_tick, plan_ticks = round(latest_s * env.fps), round(PLAN_S * env.fps)
        if latest_tick < 1 or latest_tick + plan_ticks > env.max_steps:
            raise ValueError(f"the latest takeover, {latest_s} s, is {latest_tick} ticks: it must be at least one and "
                             f"leave the expert's plan its {plan_ticks} ({PLAN_S:.1f} s) of the episode's "
                             f"{env.max_steps} ticks, so at most {env.max_steps - plan_ticks}")
        takes_images = readable_checkpoint_cameras(checkpoint) != {}
        cameras = {camera.name: (camera.height, camera.width) for camera in env.cameras} if takes_images else {}
        layout = len(environment_state_names(env.environment_layout))
        policy = ChunkPolicy.load(checkpoint, device="cpu", expect=FeatureSpec(cameras=cameras, env_state_dim=layout))
        return cls(policy, str(checkpoint), latest_tick)

    def agent(self, env: PickObjectEnv, expert: ScriptedExpert) -> TakeoverAgent:
        from act_node.episodes import checkpoint_agent

        return TakeoverAgent(env, checkpoint_agent(env, self.policy), expert,
                             latest_tick=self.latest_tick)

    def record_of(self, agent: TakeoverAgent) -> dict:
        """What meta/act_node_seeds.json keeps of a saved episode's takeover."""
        return {"policy": self.source, "tick": agent.took_over_at, "reason": agent.reason}
