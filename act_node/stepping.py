"""Stepping the table-top against action chunks, without ROS: the sim node's clock, its episodes and videos.

    chunk (stamp, actions rad) --add_chunk--> ChunkExecutor queue
                                                   |
    lockstep: step when ready() (this tick's action is queued and, at a re-plan tick, it comes from the
              chunk answering this very observation): deterministic whatever the policy's speed
    realtime: step on every wall-clock tick; hold when nothing usable is queued
                                                   |
    step() -> command (limits, velocity bound, stale hold) -> TableTop.step -> Tick (done, result)

Time is sim time: tick / fps, monotonic across episodes (a fresh tick starts each episode, so nothing of
the last episode's chunks applies). `SimEpisodes` counts holds and clamps per episode and reports them in
the EpisodeResult; `VideoWriter` encodes finished episodes on a thread of its own, so a ROS executor never
waits for ffmpeg.
"""

from __future__ import annotations

import json
import queue
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from act_node.chunks import Chunk, ChunkExecutor
from act_node.config import GraphConfig
from act_node.tabletop.cameras import camera_specs
from act_node.tabletop.table import TableTop
from act_node.tabletop.task import ObjectState
from act_node.tabletop.video import write_video


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


@dataclass
class EpisodeResult:
    episode: int
    seed: int
    task: str
    success: bool
    steps: int
    sum_reward: float
    held_ticks: int  # ticks with no usable step: the arm held its last command
    clamped_ticks: int  # ticks whose command the executor pulled into range or under the velocity bound
    clamped_joints: int  # joint values so pulled, summed over the episode
    target_error_m: float | None  # how far the target point the policy was given lay from the truth (None: none came)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


@dataclass(frozen=True)
class Tick:
    held: bool
    reason: str
    done: bool
    result: EpisodeResult | None = None


class SimEpisodes:
    """The table-top, a chunk executor and episode bookkeeping; the sim node calls these from ROS callbacks."""

    def __init__(self, config: GraphConfig):
        self.config = config
        self.fps = config.fps
        self.table = TableTop(camera_specs(config.cameras, *config.image_size), config.fps,
                              config.sim_renderer())
        self.executor = ChunkExecutor(config.fps, self.table.robot.lower, self.table.robot.upper,
                                      config.max_velocity, merge=config.merge, stale_after_s=config.stale_after_s())
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
        self.running, self.start_tick, self.sum_reward = True, self.tick, 0.0
        self.held_ticks = self.clamped_ticks = self.clamped_joints = 0
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
        return EpisodeResult(self.start.episode, self.start.seed, self.start.task, success, self.tick - self.start_tick,
                             self.sum_reward, self.held_ticks, self.clamped_ticks, self.clamped_joints, error)

    # --- chunks and the clock ---------------------------------------------------------------------------
    def add_chunk(self, stamp_s: float, actions_rad: np.ndarray) -> int:
        """Queue a chunk (radians); returns its steps dropped as already past. ValueError on a bad chunk."""
        return self.executor.add(Chunk(stamp_s, actions_rad), self.now_s)

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
        command = self.executor.next_command(self.now_s, self.table.robot.joint_positions())
        outcome = self.table.step(command.positions)
        self.held_ticks += command.held
        self.clamped_ticks += command.clamped > 0
        self.clamped_joints += command.clamped + outcome.clamped
        self.sum_reward += outcome.reward
        self.tick += 1
        steps = self.tick - self.start_tick
        if not (outcome.success or steps >= self.config.max_steps):
            return Tick(command.held, command.reason, False)
        self.running = False
        if self.episodes_left is not None:
            self.episodes_left -= 1
        return Tick(command.held, command.reason, True, self._result(outcome.success))

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.table.robot.joint_state()

    def images(self, cameras: list[str] | None = None) -> dict[str, np.ndarray]:
        """The cameras' images now (all, or those named)."""
        return self.table.rig.render(cameras)

    def close(self) -> None:
        self.table.close()


class VideoWriter:
    """Writes each finished episode's frames as an mp4 on a thread of its own, in order."""

    def __init__(self, fps: int, on_written=None):
        self.fps = fps
        self.on_written = on_written or (lambda path, error: None)  # called on the writer's thread
        self._jobs: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="video_writer", daemon=True)
        self._thread.start()

    def submit(self, frames: list[np.ndarray], path: Path) -> None:
        if frames:
            self._jobs.put((list(frames), Path(path)))

    def close(self, timeout_s: float = 60.0) -> None:
        """Finish the queued videos (up to `timeout_s`), then stop the thread."""
        self._jobs.put(None)
        self._thread.join(timeout=timeout_s)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            frames, path = job
            try:
                write_video(frames + [frames[-1]] * self.fps, path, self.fps)  # hold the outcome a second
                self.on_written(path, None)
            except Exception as error:  # a full disk or a missing codec: say so, keep the graph running
                self.on_written(path, error)


def result_path(video_dir: Path, result: EpisodeResult) -> Path:
    """Where an episode's JSON (and, with the .mp4 suffix, its video) goes."""
    return Path(video_dir) / f"episode{result.episode}_seed{result.seed}.json"

