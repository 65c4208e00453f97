"""Stepping the table-top against action chunks, without ROS: the sim node's clocks, cameras, episodes and videos.

    chunk (stamp, actions rad) --add_chunk--> ChunkExecutor queue
                                                   |
    lockstep: step when ready() (this tick's action is queued and, at a re-plan tick, it comes from the
              chunk answering this very observation): deterministic whatever the policy's speed
    realtime: step on every wall-clock tick; hold when nothing usable is queued
                                                   |
    step() -> command (limits, velocity bound, stale hold) -> TableTop.step -> Tick (done, result)

`RealtimeClock` says how many ticks the wall clock has made due; `CameraSchedule` which cameras to render at
a tick. `ExecutedAgent` runs an in-process agent's actions through the same executor (`chunk_executor`): what
`act-sim record` executes and records is the command the sim node sends, after the limits and the bound.
Time is sim time: tick / fps, monotonic across episodes (a fresh tick starts each episode, so nothing of
the last episode's chunks applies). `SimEpisodes` counts holds and clamps per episode and reports them in
the EpisodeResult; `EpisodeFilms` writes each episode's result and film, `VideoWriter` encoding them on a thread
of its own, so a ROS executor never waits for ffmpeg.
"""

from __future__ import annotations

import math
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from act_node import so101
from act_node.chunks import Chunk, ChunkExecutor
from act_node.config import GraphConfig
from act_node.episodes import EpisodeResult
from act_node.tabletop.cameras import camera_specs
from act_node.tabletop.outcomes import MODE_TITLES
from act_node.tabletop.table import TableTop
from act_node.tabletop.task import ObjectState
from act_node.tabletop.video import Shot, write_film

CATCH_UP_TICKS = 3  # realtime: at most this many extra ticks in one timer call, to regain the wall clock


@dataclass(frozen=True)
class EpisodeStart:
    episode: int
    seed: int
    task: str
    stamp_s: float
    objects: list[ObjectState]
    renderer: str = "tiny"  # what the cameras are drawn with: a policy that takes images checks it

    def info(self) -> dict:
        """What /episode/start carries besides its stamp."""
        return {"episode": self.episode, "seed": self.seed, "task": self.task, "renderer": self.renderer}


@dataclass(frozen=True)
class Tick:
    held: bool
    reason: str
    done: bool
    result: EpisodeResult | None = None
    stamp_s: float = 0.0  # the tick's time: the observation the command acted on (act/joint_command's stamp)
    command: np.ndarray | None = None  # (6,) radians: what the executor sent the arm this tick


def chunk_executor(config: GraphConfig, lower: np.ndarray, upper: np.ndarray) -> ChunkExecutor:
    """The executor the graph runs for `config` (joint ranges `lower`, `upper` in radians): its merge rule,
    velocity bound and staleness; the sim node's and `act-sim record`'s."""
    merge, coeff = config.chunk_merge()
    return ChunkExecutor(config.fps, lower, upper, config.max_velocity, merge=merge, ensemble_coeff=coeff,
                         stale_after_s=config.stale_after_s())


class ExecutedAgent:
    """An in-process agent (act_node.episodes.Agent) whose actions reach the arm as the sim node's do: each tick's
    action goes to `executor` as a chunk for that tick, and what the agent returns to the episode is the
    executor's command (joint ranges, velocity bound from the last command), in LeRobot units. So a recorder
    that records `act` records the action sent, as the graph's recorder records act/joint_command. For the
    expert the commands equal the graph's: there its chunks are windows of the one plan made at reset, so the
    executor is handed the same step for each tick. Other attributes are the agent's (`calls`, `expert_acting`)."""

    def __init__(self, env, agent, executor: ChunkExecutor):
        self.env, self.agent, self.executor = env, agent, executor
        self.tick = 0
        self.last: object = None  # the last act_node.chunks.Command: held, why, joints clamped

    def __getattr__(self, name: str):
        return getattr(self.agent, name)

    def reset(self, observation: dict) -> None:
        self.agent.reset(observation)  # the expert plans here (Unreachable goes to the episode runner)
        self.executor.reset(self.env.table.robot.joint_positions())
        self.tick, self.last = 0, None

    def needs_observation(self) -> bool:
        return self.agent.needs_observation()

    def act(self, observation: dict | None) -> np.ndarray:
        """The command sent this tick (6,) float32, LeRobot units."""
        now_s = self.tick / self.executor.fps
        wanted = so101.from_lerobot(np.asarray(self.agent.act(observation), dtype=np.float64))
        self.executor.add(Chunk(now_s, wanted[None]), now_s)
        self.last = self.executor.next_command(now_s, self.env.table.robot.joint_positions())
        self.tick += 1
        return so101.to_lerobot(self.last.positions).astype(np.float32)


def executed(env, agent, config: GraphConfig | None = None) -> ExecutedAgent:
    """`agent` over `env` with its actions executed as the graph executes them under `config` (default: the
    graph's defaults for the expert: its velocity bound, merge replace)."""
    config = config or GraphConfig(policy="expert", fps=env.fps)
    return ExecutedAgent(env, agent, chunk_executor(config, env.table.robot.lower, env.table.robot.upper))


class SimEpisodes:
    """The table-top, a chunk executor and episode bookkeeping; the sim node calls these from ROS callbacks."""

    def __init__(self, config: GraphConfig):
        self.config = config
        self.fps = config.fps
        self.table = TableTop(camera_specs(config.cameras, *config.image_size), config.fps,
                              config.sim_renderer())
        self.executor = chunk_executor(config, self.table.robot.lower, self.table.robot.upper)
        self.replan_every = config.replan_ticks()
        self.next_seed = config.first_seed
        self.episodes_left = config.episodes or None  # None: serve episodes until stopped
        self.tick = 0
        self.start_tick = 0
        self.episode = 0
        self.running = False
        self.start: EpisodeStart | None = None
        self.target_xy: np.ndarray | None = None

    @property
    def now_s(self) -> float:
        return self.tick / self.fps

    @property
    def finished(self) -> bool:
        return self.episodes_left is not None and self.episodes_left <= 0

    # --- episodes ----------------------------------------------------------------------------------------
    def start_episode(self, request: str | None = None) -> EpisodeStart:
        seed = self.next_seed
        self.next_seed += 1
        self.episode += 1
        self.tick += 1  # a fresh tick: nothing of the last episode's chunks applies
        self.table.reset(np.random.default_rng(seed), self.config.objects, request)
        self.executor.reset(self.table.robot.joint_positions())
        self.running, self.start_tick, self.sum_reward, self.max_reward = True, self.tick, 0.0, 0.0
        self.held_ticks = self.clamped_ticks = self.clamped_joints = 0
        self.policy_chunks: set[float] = set()  # the stamps of the policy's chunks taken this episode
        self.inference_s: list[float] = []  # the policy's own time for each chunk, as it said it this episode
        self.target_xy = None
        self.start = EpisodeStart(self.episode, seed, self.table.task.task, self.now_s,
                                  self.table.task.object_states(), self.table.world.client.name)
        return self.start

    def target_given(self, stamp_s: float, xy: np.ndarray) -> bool:
        """A target point for this episode (stamped at or after its start); False for an older one."""
        if self.start is None or stamp_s < self.start.stamp_s - 1e-9:
            return False
        self.target_xy = np.asarray(xy, dtype=np.float64)
        return True

    def _result(self, success: bool) -> EpisodeResult:
        error = None
        if self.target_xy is not None:
            error = float(np.hypot(*(self.target_xy - self.table.task.scene.target.xy)))
        return EpisodeResult(self.start.seed, self.start.task, success, self.tick - self.start_tick, self.sum_reward,
                             self.max_reward, clamped_joints=self.clamped_joints, clamped_ticks=self.clamped_ticks,
                             held_ticks=self.held_ticks, target_error_m=error, lifted=self.table.task.lifted(),
                             policy_calls=len(self.policy_chunks),
                             mean_inference_s=float(np.mean(self.inference_s)) if self.inference_s else None,
                             episode=self.start.episode, outcome=self.table.watch.mode(success),
                             outcome_facts=self.table.watch.facts.to_dict())

    # --- chunks and the clock ---------------------------------------------------------------------------
    def add_chunk(self, stamp_s: float, actions_rad: np.ndarray) -> int | None:
        """Queue a chunk (radians); returns its steps dropped as already past, or None for a chunk that answers an
        observation of an earlier episode (a policy still answering the last one when this one began), which is
        not queued: its later steps would be merged into this episode's ticks, and under ensembling, as the
        oldest prediction for each, weigh the most. ValueError on a bad chunk."""
        if self.start is None or stamp_s < self.start.stamp_s - 0.5 / self.fps:
            return None
        return self.executor.add(Chunk(stamp_s, actions_rad), self.now_s)

    def policy_chunk(self, stamp_s: float, actions_rad: np.ndarray) -> int | None:
        """`add_chunk` for a chunk from the policy (or the expert): each one taken for the running episode is a
        call of the policy, counted once (a chunk said again to a re-sent observation has its stamp)."""
        dropped = self.add_chunk(stamp_s, actions_rad)
        if dropped is not None and self.running:
            self.policy_chunks.add(round(stamp_s * self.fps))
        return dropped

    def policy_inference(self, seconds: float) -> None:
        """The policy's own time for a chunk (act/inference_latency), counted in the running episode's mean."""
        if self.running and math.isfinite(seconds) and seconds >= 0:
            self.inference_s.append(float(seconds))

    def ready(self) -> bool:
        """Lockstep: this tick's action is queued, and at a re-plan tick it comes from the answering chunk."""
        if not self.running or not self.executor.has_step(self.now_s):
            return False
        due = self.replan_every and (self.tick - self.start_tick) % self.replan_every == 0
        return not due or self.executor.newest_stamp_s >= self.now_s - 0.5 / self.fps

    def step(self) -> Tick:
        """One control tick: the executor's command (or a hold), physics, the task's judgement."""
        if not self.running:
            raise RuntimeError("no episode is running: start one first")
        stamp_s = self.now_s
        command = self.executor.next_command(stamp_s, self.table.robot.joint_positions())
        outcome = self.table.step(command.positions)
        self.held_ticks += command.held
        self.clamped_ticks += command.clamped > 0
        self.clamped_joints += command.clamped + outcome.clamped
        self.sum_reward += outcome.reward
        self.max_reward = max(self.max_reward, outcome.reward)
        self.tick += 1
        steps = self.tick - self.start_tick
        if not (outcome.success or steps >= self.config.max_steps):
            return Tick(command.held, command.reason, False, None, stamp_s, command.positions)
        self.running = False
        if self.episodes_left is not None:
            self.episodes_left -= 1
        return Tick(command.held, command.reason, True, self._result(outcome.success), stamp_s, command.positions)

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.table.robot.joint_state()

    def images(self, cameras: list[str] | None = None) -> dict[str, np.ndarray]:
        """The cameras' images now (all, or those named)."""
        return self.table.rig.render(cameras)

    def work_left(self) -> str | None:
        """What a stop now cuts short (the runner says it on stderr; the exit code stays 0), or None: a count of
        episodes, or nothing when it serves until stopped (episodes:=0)."""
        left = self.episodes_left
        if left is None or left <= 0:
            return None
        return f"{left} of {self.config.episodes} episodes not finished"

    def close(self) -> None:
        self.table.close()


class RealtimeClock:
    """Realtime: which ticks the wall clock says are due, normally one per timer call. A ROS timer skips the
    periods a late callback missed, so a tick that overran its period (cameras rendering, a new episode's scene
    being built) would put the sim behind real time for good; the ticks it cost follow, up to `catch_up` more
    in one call. More than a second behind (a stall), or with no episode running, the schedule restarts from
    now (half a period early: timer jitter)."""

    def __init__(self, fps: float, catch_up: int = CATCH_UP_TICKS):
        self.period, self.fps, self.catch_up = 1.0 / fps, fps, catch_up
        self.origin: float | None = None  # wall time of tick 0 of the schedule
        self.scheduled = 0  # ticks handed out on that schedule

    def due(self, now_s: float, running: bool) -> int:
        """How many ticks to step now (`now_s`: a monotonic wall time), counted as stepped."""
        if self.origin is None or not running:
            self.origin, self.scheduled = now_s - 0.5 * self.period, 0
        due = math.floor((now_s - self.origin) / self.period) + 1 - self.scheduled
        if due > self.fps:  # more than a second behind: start the schedule again from now
            self.origin, due = now_s - (self.scheduled + 0.5) * self.period, 1
        ticks = min(max(due, 0), 1 + self.catch_up)
        self.scheduled += ticks
        return ticks


class CameraSchedule:
    """Which cameras to render at a tick: all while filming; else, at the ticks someone consumes (see
    GraphConfig.camera_every), those with a subscriber. Skipping the rest changes no result: the physics does
    not depend on rendering, and the policy is sent every image it answers.

    Realtime (camera_every 0): the policy answers the newest observation whenever it is free, and it is free
    once its chunk is out, so the cameras render at an episode's first tick and at the tick after each chunk
    arrives. Should a chunk or an image be lost (best effort) or the policy start late, they also render once no
    chunk came for a second, or for twice the last gap between chunks if that is longer (a slow policy is not
    handed an image older than the one it would ask for)."""

    def __init__(self, config: GraphConfig, replan_every: int, filming: bool):
        self.config, self.replan_every, self.filming = config, replan_every, filming
        self.answered = False  # a chunk came since the cameras last rendered
        self.rendered_tick, self.rendered_in = 0, None  # the tick and the episode of that render
        self.chunk_ticks: deque[int] = deque(maxlen=2)  # the ticks at which the last two chunks came

    def chunk_arrived(self, tick: int) -> None:
        self.answered = True  # the policy is free: the next tick renders its cameras (realtime)
        self.chunk_ticks.append(tick)

    def due(self, tick: int, start_tick: int, episode: object, cameras: list[str],
            subscribed: Callable[[str], bool]) -> list[str]:
        """The cameras to render at `tick` of the episode `episode` (any object naming it) begun at
        `start_tick`; `subscribed(camera)`: whether anyone listens to it."""
        if self.filming:
            return list(cameras)
        if self.config.clock == "realtime" and not self.config.camera_every:
            gap = self.chunk_ticks[1] - self.chunk_ticks[0] if len(self.chunk_ticks) == 2 else 0
            patience = max(int(self.config.fps), 2 * gap)
            fresh = self.rendered_in is not episode  # the episode's first render
            if not (self.answered or fresh or tick - self.rendered_tick >= patience):
                return []
        else:
            every = self.config.camera_every or (self.replan_every if self.config.clock == "lockstep" else 1)
            if (tick - start_tick) % (every or 1):
                return []
        due = [camera for camera in cameras if subscribed(camera)]
        if due:
            self.rendered_tick, self.rendered_in, self.answered = tick, episode, False
        return due


class VideoWriter:
    """Writes each finished episode's film (an mp4 and its picture, act_node.tabletop.video.write_film) on a thread
    of its own, in order."""

    def __init__(self, fps: int, on_written=None):
        self.fps = fps
        self.on_written = on_written or (lambda path, error: None)  # called on the writer's thread
        self._jobs: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="video_writer", daemon=True)
        self._thread.start()

    def submit(self, shots: list[Shot], path: Path, outcome: str) -> None:
        """Film the shots into `path` (.mp4) and its .png, the last one held a second under `outcome`."""
        if shots:
            self._jobs.put((list(shots), Path(path), outcome))

    def close(self, timeout_s: float = 60.0) -> None:
        """Finish the queued videos (up to `timeout_s`), then stop the thread."""
        self._jobs.put(None)
        self._thread.join(timeout=timeout_s)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            shots, path, outcome = job
            try:
                write_film(shots, outcome, path, self.fps)
                self.on_written(path, None)
            except Exception as error:  # a full disk or a missing codec: say so, keep the graph running
                self.on_written(path, error)


def result_path(video_dir: Path, result: EpisodeResult) -> Path:
    """Where an episode's JSON (and, with the .mp4 suffix, its video) goes."""
    return Path(video_dir) / f"episode{result.episode}_seed{result.seed}.json"



def film_outcome(result: EpisodeResult) -> str:
    """The line under an episode film's last frame: the task and how it ended."""
    ended = "succeeded" if result.success else "failed"
    why = f": {MODE_TITLES.get(result.outcome, result.outcome)}," if result.outcome and not result.success else ""
    return f"episode {result.episode} (seed {result.seed}): {result.task}  {ended}{why} after {result.steps} steps"


class EpisodeFilms:
    """The sim's episodes on disk: each result as JSON under `video_dir` (config.video_dir; none: nothing written)
    and, with `record_video`, its film, the ticks' frames gathered as they are published and encoded on
    VideoWriter's thread once the episode ends. `on_written(path, error)` hears of each video."""

    def __init__(self, config: GraphConfig, on_written=None):
        self.video_dir = Path(config.video_dir) if config.video_dir else None
        self.filming = self.video_dir is not None and config.record_video
        self.videos = VideoWriter(config.fps, on_written) if self.filming else None
        self.frames: list[Shot] = []

    def started(self) -> None:
        self.frames = []  # an episode cut short by a new one (~/reset, a request) leaves no frames behind

    def shot(self, images: dict, start: EpisodeStart, stamp_s: float) -> None:
        if self.filming:
            self.frames.append(Shot(images, f"episode {start.episode}: {start.task}  t {stamp_s:.2f} s"))

    def ended(self, result: EpisodeResult) -> None:
        """The episode's JSON at its result_path, its video beside it (.mp4); the next episode films afresh."""
        if self.video_dir is not None:
            path = result_path(self.video_dir, result)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(result.to_json() + "\n")
            if self.videos is not None:
                self.videos.submit(self.frames, path.with_suffix(".mp4"), film_outcome(result))
        self.frames = []

    def close(self) -> None:
        if self.videos is not None:
            self.videos.close()
