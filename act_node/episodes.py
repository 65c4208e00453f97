"""One seeded episode of the table-top under an agent, and the one record of how it went. No ROS, no torch.

    env.reset(seed) -> agent.reset(observation)      (the expert plans here: Unreachable -> "unplannable")
      loop: action = agent.act(observation) -> on_step(observation, action) -> env.act(action)
            -> env.observe() only when something reads it (the agent's next act, on_step, a video)
      until the success or the step limit, then `after_success` more frames (recording: the lift and the hold)
    -> EpisodeResult

`act-lab expert` (the expert's success rate), `act-sim eval` (a checkpoint), `act-sim record` (a dataset) and
the sim node's /episode/result all report an EpisodeResult: one set of keys in every JSON file and report.
An agent is built over its env and has `reset(observation)`, `act(observation) -> (6,)` in LeRobot units, and
`needs_observation()`: whether its next act reads the observation (a chunk policy only at its re-plan ticks;
the expert never after its plan), so that the cameras render only when someone looks. Skipping them changes
no result: the physics does not depend on rendering.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Protocol

import numpy as np

from act_node import so101
from act_node.chunks import ENSEMBLE_COEFF, Chunk, ChunkExecutor
from act_node.tabletop.kinematics import Unreachable
from act_node.tabletop.video import caption, step_caption

if TYPE_CHECKING:
    from act_node.tabletop.env import PickObjectEnv


@dataclass
class EpisodeResult:
    """How one episode went: the same keys wherever an episode is reported."""

    seed: int
    task: str
    success: bool  # the requested object 5 cm up and held (act_node.tabletop.task), at the episode's end
    steps: int  # control ticks until the success or the step limit (frames after the success not counted)
    sum_reward: float
    max_reward: float = 0.0
    clamped_joints: int = 0  # joint values pulled into range or under the velocity bound, summed over the episode
    clamped_ticks: int = 0  # ticks with at least one such joint (the sim node's executor)
    held_ticks: int = 0  # ticks with no usable step: the arm held its last command (the sim node)
    target_error_m: float | None = None  # how far the target the agent was given lay from the truth (None: none)
    selector_found: bool = True  # False: the Selector judged the requested kind absent; the truth stood in
    lifted: list[str] = field(default_factory=list)  # kinds up at the episode's end (a distractor, say)
    unplannable: str | None = None  # why the expert could not plan the scene (then no step ran)
    held_after_success: bool | None = None  # after `after_success` frames: still up and held (None: not asked)
    policy_calls: int = 0  # chunks the policy computed for the episode (the graph: the chunks the sim took from it)
    # its mean time a chunk (the graph: the policy node's own, act/inference_latency); None: nobody said (the expert)
    mean_inference_s: float | None = 0.0
    episode: int | None = None  # its number in a graph's run (the sim node), None in-process
    interrupted: str | None = None  # the sim node held ticks for want of any action (a node died): failed
    outcome: str | None = None  # why it ended: one of act_node.tabletop.outcomes.MODES (None: an older record)
    outcome_facts: dict | None = None  # what that was judged from (OutcomeFacts.to_dict)
    # target_tool_yaw_grasp: what the grasp was planned from (act_node.grasp.Grasp.source: "scene", "target
    # alone", "none"); None for the other layouts
    grasp_source: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, values: dict) -> EpisodeResult:
        """The record from its dict (a JSON file, the episode topic); ValueError names a missing or unknown key."""
        known = {spec.name for spec in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"an episode result has unknown keys {unknown}; known: {sorted(known)}")
        try:
            return cls(**values)
        except TypeError as error:
            raise ValueError(f"an episode result lacks a key: {error}") from None


class EpisodeStopped(Exception):
    """A stop was asked for before the episode ended (Ctrl-C, SIGTERM): nothing of it counts."""

    def __init__(self, seed: int, steps: int):
        super().__init__(f"episode of seed {seed} stopped after {steps} steps")
        self.seed, self.steps = seed, steps


class Agent(Protocol):
    def reset(self, observation: dict) -> None: ...

    def act(self, observation: dict | None) -> np.ndarray: ...

    def needs_observation(self) -> bool: ...


class ChunkAgent:
    """A chunk policy (act_node.policy.ChunkPolicy, or anything `policy(observation, task) -> (chunk, seconds)`)
    run through the graph's own act_node.chunks.ChunkExecutor: reset each episode, asked every `n_action_steps`
    ticks, each chunk stamped with its tick and merged by `merge` (act_node.chunks.MERGE_RULES). replace executes
    each chunk's first `n_action_steps` actions, as lerobot-eval does; ensemble, asked every tick, is ACT's temporal
    ensembling as LeRobot's ACTPolicy.select_action runs it when its config has `temporal_ensemble_coeff` (the same
    weights as its ACTTemporalEnsembler: tests/test_chunks.py); average is the graph's half and half. In process the
    executor bounds nothing (the env clamps to the joint ranges) and never goes stale: the sim waits for the policy.
    The chunks are unnormalized here, which the weighted mean, being affine, does not mind; with LeRobot's own
    weights (lerobot_weights) and float32 chunks its arithmetic is ACTPolicy's to the bit."""

    def __init__(self, env: PickObjectEnv, policy, n_action_steps: int, merge: str = "replace",
                 ensemble_coeff: float = ENSEMBLE_COEFF):
        if n_action_steps < 1:
            raise ValueError(f"n_action_steps must be at least 1, got {n_action_steps}")
        self.env, self.policy, self.n_action_steps = env, policy, n_action_steps
        joints = len(so101.JOINT_NAMES)
        self.executor = ChunkExecutor(env.fps, np.full(joints, -np.inf), np.full(joints, np.inf), np.inf, merge=merge,
                                      ensemble_coeff=ensemble_coeff, stale_after_s=np.inf)
        self.start = np.zeros(joints)
        self.tick, self.calls, self.inference_s = 0, 0, 0.0

    @property
    def merge(self) -> str:
        return self.executor.merge

    def reset(self, observation: dict) -> None:
        self.policy.reset()
        self.start = np.asarray(observation.get("agent_pos", np.zeros(len(so101.JOINT_NAMES))), float)
        self.executor.reset(self.start)  # held should a tick find no step (none does: chunks cover their cadence)
        self.tick, self.calls, self.inference_s = 0, 0, 0.0

    def needs_observation(self) -> bool:
        return self.tick % self.n_action_steps == 0

    def act(self, observation: dict | None) -> np.ndarray:
        now_s = self.tick / self.executor.fps
        if self.needs_observation():
            chunk, seconds = self.policy(observation, self.env.task)
            if self.merge == "ensemble" and self.executor.ensemble_weights is None:
                self.executor.ensemble_weights = lerobot_weights(self.executor.ensemble_coeff, len(chunk))
            self.executor.add(Chunk(now_s, np.asarray(chunk)), now_s)
            self.calls, self.inference_s = self.calls + 1, self.inference_s + seconds
        self.tick += 1
        return self.executor.next_command(now_s, self.start).positions


def lerobot_weights(coeff: float, chunk_size: int) -> np.ndarray:
    """LeRobot's ACTTemporalEnsembler's own weights (chunk_size,) float32, w_i = exp(-coeff * i): with them and float32
    chunks the executor's ensemble is ACTPolicy.select_action's arithmetic to the bit (tests/test_chunks.py)."""
    from lerobot.policies.act.modeling_act import ACTTemporalEnsembler

    return ACTTemporalEnsembler(coeff, chunk_size).ensemble_weights.numpy()


def policy_agent(env: PickObjectEnv, policy, n_action_steps: int, ensemble_coeff: float | None = None,
                 merge: str | None = None) -> ChunkAgent:
    """A chunk policy run through the chunk executor, asked every `n_action_steps` ticks: `merge` (default: ensemble
    given `ensemble_coeff`, ACT's temporal ensembling, else replace, chunks of n_action_steps as lerobot-eval runs
    them)."""
    merge = merge or ("replace" if ensemble_coeff is None else "ensemble")
    return ChunkAgent(env, policy, n_action_steps, merge, ENSEMBLE_COEFF if ensemble_coeff is None else ensemble_coeff)


def checkpoint_agent(env: PickObjectEnv, policy) -> ChunkAgent:
    """The checkpoint as its own config runs it: temporal_ensemble_coeff set, ACT's temporal ensembling; else
    chunks of its n_action_steps."""
    return policy_agent(env, policy, int(policy.config.n_action_steps),
                        getattr(policy.config, "temporal_ensemble_coeff", None))


def run_episode(env: PickObjectEnv, agent: Agent, seed: int, *, frames: list | None = None,
                on_step: Callable[[dict, np.ndarray], None] | None = None, after_success: int = 0,
                stop: Callable[[], bool] | None = None, observe_every_tick: bool = False,
                execute: Callable[[int, np.ndarray], np.ndarray] | None = None) -> EpisodeResult:
    """One seeded episode of `agent` in `env`. `frames`: a list to append captioned video frames to;
    `on_step(observation, action)`: each action with the observation it was chosen on (a recorder; the cameras
    then render every tick); `after_success`: frames to go on for past a success, the result saying whether the
    object was still up and held after them; `stop()`: polled before each step, EpisodeStopped when it is true;
    `execute(tick, action)`: the action the arm is sent instead of the agent's (on_step still gets the agent's:
    act_node.tabletop.perturb.ActionNoise records recoveries so)."""
    rollout = Rollout(env, agent, seed, frames=frames, on_step=on_step, after_success=after_success,
                      observe_every_tick=observe_every_tick, execute=execute)
    while not rollout.finished:
        if stop is not None and stop():
            raise EpisodeStopped(seed, rollout.ticks)
        rollout.step()
    return rollout.result()


class Rollout:
    """One episode, tick by tick: run_episode drives one alone, act_node.lockstep many side by side, so an episode
    ends, counts and reports the same way in both. `pixels` False: no observation renders the cameras (nobody reads
    them: a policy without images, no frames, no on_step); the physics does not depend on rendering."""

    def __init__(self, env: PickObjectEnv, agent: Agent, seed: int, *, frames: list | None = None,
                 on_step: Callable[[dict, np.ndarray], None] | None = None, after_success: int = 0,
                 observe_every_tick: bool = False, execute: Callable[[int, np.ndarray], np.ndarray] | None = None,
                 pixels: bool = True):
        self.env, self.agent, self.seed = env, agent, seed
        self.frames, self.on_step, self.after_success, self.execute = frames, on_step, after_success, execute
        self.pixels = pixels or frames is not None or on_step is not None
        self.observation, self.info = env.reset(seed=seed)
        self.total, self.best, self.steps, self.extra = 0.0, 0.0, 0, 0
        self.done, self.finished, self.unplannable = False, False, None
        self.not_seen = getattr(env, "scene_source", "sim") == "cameras" and not self.info["selector_found"]
        if self.not_seen:  # the scene reader did not see the requested kind: no target, the arm would only hold
            self.finished = True
            return
        try:
            agent.reset(self.observation)
        except Unreachable as error:
            self.unplannable, self.finished = str(error), True
            return
        if frames is not None:
            frames.append(caption(env.render(), step_caption(seed, env.task)))
        self.observe = observe_every_tick or frames is not None or on_step is not None

    @property
    def ticks(self) -> int:
        return self.steps + self.extra

    def step(self) -> None:
        """One tick: the agent's action on the latest observation, the env stepped, the next observation taken
        if anyone reads it."""
        env, observation = self.env, self.observation
        action = self.agent.act(observation)
        if self.on_step is not None:
            self.on_step(observation, action)
        tick = self.ticks
        reward, terminated, truncated, step_info = env.act(action if self.execute is None
                                                           else self.execute(tick, action))
        if self.done:
            self.extra += 1
        else:
            self.total, self.best, self.steps, self.info = (self.total + reward, max(self.best, reward),
                                                            self.steps + 1, step_info)
            self.done = terminated or truncated
        if self.observe or self.agent.needs_observation():
            self.observation = env.observe() if self.pixels else env.observe(render=False)
        if self.frames is not None:
            self.frames.append(caption(env.render(), step_caption(self.seed, env.task, step_info, reward)))
        # a failure has no frames after it; a success goes on for after_success frames
        self.finished = self.done and (not self.info["is_success"] or self.extra >= self.after_success)

    def result(self) -> EpisodeResult:
        env, info, agent = self.env, self.info, self.agent
        if self.not_seen:
            return EpisodeResult(self.seed, env.task, False, 0, 0.0, target_error_m=info["target_error_m"],
                                 selector_found=False, outcome="target_not_seen")
        if self.unplannable is not None:
            return EpisodeResult(self.seed, env.task, False, 0, 0.0, target_error_m=info["target_error_m"],
                                 selector_found=info["selector_found"], unplannable=self.unplannable,
                                 outcome="unplannable")
        held = env.table.task.is_success() if self.after_success and info["is_success"] else None
        return EpisodeResult(self.seed, env.task, bool(info["is_success"]), self.steps, self.total, self.best,
                             clamped_joints=info["clamped_total"], target_error_m=info["target_error_m"],
                             selector_found=info["selector_found"], lifted=list(info.get("lifted", [])),
                             held_after_success=held, outcome=info.get("outcome"),
                             outcome_facts=info.get("outcome_facts"), policy_calls=getattr(agent, "calls", 0),
                             mean_inference_s=getattr(agent, "inference_s", 0.0) / max(getattr(agent, "calls", 0), 1),
                             grasp_source=info.get("grasp_source"))
