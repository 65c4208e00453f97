"""Demonstrations from stamped streams, without ROS: frames matched by stamp, episodes into a LeRobotDataset.

    act/joint_command (one a tick: the applied command, stamped with the tick)  --\\
    joint_states (the same tick's measured joints)                               ---> FrameMatcher ---> Frame
    camera/<name>/image_raw (the same tick's images)                            --/        |
                                                                   DemonstrationWriter: build_observation,
                                                                   dataset_frame -> LeRobotDataset v3

The recorder node (a live graph) and `act-sim bag2dataset` (a rosbag2 bag) both feed the one FrameMatcher and
write through the one DemonstrationWriter, with act_node.observation's builders: the same features, names and
units as `act-sim record`, so what they record trains with `act-sim train` unchanged.

A frame is a command, the joint states stamped within `skew_s` of it (the arm node and the sim stamp both with
the tick's read) and each camera's image by act_node.observation.FrameBounds, the policy node's rule: the camera's
newest frame not stamped after the command (beyond `skew_s`) nor older than `frame_max_age` of the camera's
periods (0: only a frame of the command's own stamp, the sim's). A frame waits until every camera's pick is
settled (the camera has shown a frame after the command, or the pick has its stamp), so that a live graph and a
bag of it give the same frames. A frame still missing a part once the streams have moved `late_s` past it is
given up and counted as incomplete (by the part that was missing); a part that arrives after its frame was
given up or written is counted as late. A
DemonstrationWriter saves an episode only when no more than `max_incomplete` of its frames were given up,
and says why it dropped one.
"""

from __future__ import annotations

import errno
import math
import threading
from collections import Counter, deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from act_node import so101
from act_node.description import tool_point
from act_node.encoding import save_episode
from act_node.observation import (
    PERIOD_GAPS,
    FrameAges,
    FrameBounds,
    StampedFrames,
    build_observation,
    camera_periods,
    dataset_frame,
    periods_of_rates,
    requested_kind,
)


@dataclass(frozen=True)
class Frame:
    stamp_s: float
    joints_rad: np.ndarray  # (6,) measured
    images: dict[str, np.ndarray]  # {camera: (H, W, 3) uint8}
    command_rad: np.ndarray  # (6,) applied this tick


@dataclass
class MatchCounts:
    complete: int = 0
    incomplete: Counter = field(default_factory=Counter)  # given-up frames, by the part they lacked
    late: Counter = field(default_factory=Counter)  # parts that came after their frame was settled, by source

    @property
    def given_up(self) -> int:
        return sum(self.incomplete.values())


class FrameMatcher:
    """Matches each command with the joint states of its stamp and every camera's image by FrameBounds."""

    def __init__(self, cameras: list[str], skew_s: float = 0.005, late_s: float = 0.5, max_age: float = 0.0,
                 periods: Mapping[str, float] | float = 1 / 30, ages: FrameAges | None = None):
        """`periods`: each camera's period in seconds (1 / its frames a second), or one for all."""
        if skew_s < 0 or late_s <= 0:
            raise ValueError(f"skew_s must be >= 0 and late_s > 0, got {skew_s} and {late_s}")
        self.cameras, self.skew_s, self.late_s = list(cameras), skew_s, late_s
        self.bounds = FrameBounds(skew_s, max_age)
        self.periods = camera_periods(self.cameras, periods)
        self.sources = ["joints", *self.cameras]
        self.commands: deque[tuple[float, np.ndarray]] = deque()
        self.parts: dict[str, StampedFrames] = {source: StampedFrames(keep=None) for source in self.sources}
        self.newest_s = -math.inf  # the newest stamp any stream has shown
        self.settled_s = -math.inf  # frames up to here are written or given up
        self.counts = MatchCounts()
        self.ages = ages if ages is not None else FrameAges()  # each settled frame's cameras: how old, or none

    def clear(self) -> None:
        """Forget everything buffered (an episode ends); the counts start again."""
        self.commands.clear()
        for buffer in self.parts.values():
            buffer.clear()
        self.newest_s = self.settled_s = -math.inf
        self.counts = MatchCounts()

    def add_command(self, stamp_s: float, positions: np.ndarray) -> None:
        if stamp_s <= self.settled_s:
            self.counts.late["command"] += 1
            return
        self.commands.append((stamp_s, np.asarray(positions, float)))
        self.newest_s = max(self.newest_s, stamp_s)

    def add(self, source: str, stamp_s: float, value) -> None:
        """A joint state ("joints") or a camera's image (its name)."""
        if source not in self.parts:
            raise KeyError(f"unknown source {source!r}; sources are {self.sources}")
        if stamp_s < self.settled_s - self.skew_s:
            self.counts.late[source] += 1
            return
        self.parts[source].add(stamp_s, value)
        self.newest_s = max(self.newest_s, stamp_s)

    def frames(self, flush: bool = False) -> list[Frame]:
        """The frames settled now, in stamp order: complete ones; incomplete ones older than the newest stamp
        by `late_s` (or all of them, `flush`) are given up and counted."""
        out = []
        self.commands = deque(sorted(self.commands, key=lambda item: item[0]))
        while self.commands:
            stamp, command = self.commands[0]
            parts, settled = self._parts(stamp)
            missing = [source for source, part in parts.items() if part is None]
            if (missing or not settled) and not flush and self.newest_s - stamp < self.late_s:
                break  # its parts may still come, or a newer frame of a camera
            self.commands.popleft()
            self.settled_s = stamp
            for camera in self.cameras:
                self.ages.add(camera, None if parts[camera] is None else stamp - parts[camera][0])
            if missing:
                self.counts.incomplete[",".join(missing)] += 1
            else:
                self.counts.complete += 1
                out.append(Frame(stamp, np.asarray(parts["joints"][1], float),
                                 {camera: parts[camera][1] for camera in self.cameras}, command))
            self._forget_before(stamp)
        return out

    def _parts(self, stamp: float) -> tuple[dict[str, tuple[float, object] | None], bool]:
        """Each source's (stamp, value) for the command of `stamp` (None: none), and whether no later message
        can change them."""
        joints = self.parts["joints"].nearest(stamp)
        parts = {"joints": joints if joints is not None and abs(joints[0] - stamp) <= self.skew_s else None}
        settled = True
        for camera in self.cameras:
            parts[camera] = self.bounds.pick(self.parts[camera], stamp, self.periods[camera])
            settled = settled and self.bounds.settled(self.parts[camera], stamp, parts[camera])
        return parts, settled

    def _forget_before(self, stamp: float) -> None:
        """Forget what no later command can take: joint states before `stamp` (less skew_s), and each camera's
        frames older than its newest one up to `stamp` (plus skew_s), which a later command may still take."""
        self.parts["joints"].keep_only(lambda at: at >= stamp - self.skew_s)
        for camera in self.cameras:
            frames = self.parts[camera]
            picked = frames.newest_in(-math.inf, stamp + self.skew_s)
            if picked is not None:
                frames.keep_only(lambda at, oldest=picked[0]: at >= oldest)


class EpisodeDropped(Exception):
    """An episode not kept; the message says why."""


class DemonstrationWriter:
    """A LeRobotDataset written episode by episode from frames (act_node.record's create, resume and recovery):
    `start(task)`, `add(frame, target_xy)`, then `save(seed)` or `discard()`; `close()` finalizes.
    Every finished episode is kept whatever stops the process afterwards, as `act-sim record` does."""

    def __init__(self, spec, repo_id: str, root: str | Path, resume: bool = False, max_incomplete: float = 0.05,
                 image_writer_threads: int = 4):
        from act_node.record import create_dataset, resume_dataset

        self.spec, self.root, self.max_incomplete = spec, Path(root), max_incomplete
        # LeRobot's image writer threads: a live graph's frames keep coming while the PNGs are written
        opened = (resume_dataset if resume else create_dataset)(spec, repo_id, self.root,
                                                                  image_writer_threads=image_writer_threads)
        self.dataset, self.seeds = opened
        self.task: str | None = None
        self.frames = 0
        self.closed = False

    @property
    def episodes(self) -> int:
        return self.dataset.meta.total_episodes

    def start(self, task: str) -> None:
        """A new episode with this task text ("pick up the cup"); one in progress is dropped first."""
        if self.frames:
            self.discard()
        self.task, self.frames = task, 0

    def add(self, frame: Frame, target_xy=None) -> None:
        """A frame of the episode in progress; the target (table frame, metres) when the spec records
        environment_state. ValueError (nothing added) on an unknown requested kind or a missing target."""
        if self.task is None:
            raise RuntimeError("no episode in progress: start(task) first")
        if self.spec.environment_state:
            if target_xy is None:
                raise ValueError("this dataset records the target (observation.environment_state), and no target "
                                 "point has come for the episode")
            layout = getattr(self.spec, "environment_layout", "target")
            tool = tool_point(frame.joints_rad) if layout == "target_tool" else None
            observation = build_observation(frame.joints_rad, frame.images, target_xy, requested_kind(self.task),
                                            layout, tool)
        else:
            observation = build_observation(frame.joints_rad, frame.images)
        self.dataset.add_frame(dataset_frame(observation, so101.to_lerobot(frame.command_rad), self.task))
        self.frames += 1

    def save(self, seed: int | None = None, given_up: int = 0) -> int:
        """Keep the episode in progress (seed: the scene's, when one made it); the frames saved. EpisodeDropped
        (the episode discarded) when it has no frame or more than `max_incomplete` of its frames were given up."""
        frames, total = self.frames, self.frames + given_up
        if frames == 0 or given_up > self.max_incomplete * total:
            self.discard()
            raise EpisodeDropped(f"{given_up} of {total} frames incomplete (at most {self.max_incomplete:.0%} may be)"
                                 if frames else "no complete frame")
        save_episode(self.dataset)
        self.seeds.add(seed)
        self.seeds.write(self.root)
        self.task, self.frames = None, 0
        return frames

    def discard(self) -> None:
        self.dataset.clear_episode_buffer()
        self.task, self.frames = None, 0

    def close(self) -> None:
        """Drop the episode in progress and finalize: the dataset then loads in LeRobot (idempotent)."""
        if self.closed:
            return
        self.closed = True
        from act_node.record import abandon_episode

        abandon_episode(self.dataset, self.seeds, None, self.root)


# a sim episode whose successor's start came before its result: it waits end_wait_s for the result
OVERTAKEN = "overtaken"


@dataclass
class Episode:
    """One episode being recorded: its frames are matched apart from the next one's."""

    task: str
    start_s: float
    seed: int | None
    renderer: str | None
    matcher: FrameMatcher
    end: object = None  # None while it runs; then its EpisodeResult (the sim), "stop", "discard" or OVERTAKEN
    deadline: float = 0.0  # clock time by which its last parts must be in
    opened: bool = False  # the writer has started it
    stop_s: float | None = None  # "stop": the stamp it was stopped at (commands up to it are its ticks), if known
    # what became of it once written: (kept, what the recorder said of it)
    outcome: Future = field(default_factory=Future)


@dataclass(frozen=True)
class RecorderSettings:
    root: Path
    repo_id: str = "local/act_node_demonstrations"
    cameras: tuple[str, ...] = ("front", "wrist")
    fps: float = 30.0
    use_target: bool = True
    robot_type: str = "so101_sim"
    keep_failures: bool = False
    resume: bool = False
    skew_s: float = 0.005
    late_s: float = 0.5
    # an ended episode waits for its last parts this long (wall seconds) when they are not all in: a reliable
    # command still queued behind a busy moment is not "never heard" (0.5 s lost two on a loaded machine)
    end_wait_s: float = 5.0
    max_incomplete: float = 0.05
    image_writer_threads: int = 4
    environment_layout: str = "target"  # with use_target: which of act_node.observation.JOINT_LAYOUTS is recorded
    # the oldest camera frame a command takes, in the camera's periods (act_node.observation.FrameBounds): 0, only
    # frames of the command's own stamp (the sim's streams all carry the tick's); an arm's cameras run on their own
    # clocks (act_node.observation.FRAME_MAX_AGE)
    frame_max_age: float = 0.0
    camera_fps: tuple[float, ...] = ()  # each camera's frames a second, in `cameras`' order (empty: fps for all)

    def __post_init__(self):
        from act_node.observation import JOINT_LAYOUTS

        if self.frame_max_age < 0:
            raise ValueError(f"frame_max_age must be >= 0 (camera periods), got {self.frame_max_age}")
        periods_of_rates(list(self.cameras), list(self.camera_fps), self.fps)  # ValueError naming a bad one
        if self.environment_layout not in JOINT_LAYOUTS:
            raise ValueError(f"environment_layout {self.environment_layout!r}: a recording of streams builds "
                             f"{', '.join(JOINT_LAYOUTS)} from the joint states and the target; target_tool_yaw "
                             "needs the yaw reader (act-sim record --environment-state target_tool_yaw)")


class Recorder:
    """Episodes of streams into a dataset: what the recorder node and `act-sim bag2dataset` both run.

    Feed it `command`, `part` and `set_target` as messages come (any thread), `begin` and `end` an episode,
    and call `write_due` (one thread) to write the settled frames and end the episodes that are over; `close`
    keeps every ended episode and finalizes. Streams race: the last two seconds of every stream are kept, so
    that what came before its episode's start message still counts. `clock()` gives the time the deadlines
    are in (the node: wall time; a bag: its log time); `say(text, error)` reports each episode's end."""

    def __init__(self, settings: RecorderSettings, say: Callable[[str, bool], None],
                 clock: Callable[[], float]):
        self.settings, self.say, self.clock = settings, say, clock
        self.lock = threading.Lock()
        self.episodes: list[Episode] = []  # the one running last; ended ones before it until written
        self.recent: deque[tuple[str, float, object]] = deque(
            maxlen=2 * int(settings.fps) * (2 + len(settings.cameras)))
        # the target points heard, newest last: an episode's frames take the newest of its own (the next
        # episode's can come before the last frames of this one are written, and must not be theirs)
        self.targets: deque[tuple[float, np.ndarray]] = deque(maxlen=64)
        self.writer: DemonstrationWriter | None = None
        self.saved, self.dropped = 0, 0
        self.newest_command_s = -math.inf  # the newest command heard (they come in order, reliably)
        self.ages = FrameAges()  # every episode's frames: how old each camera's was, how often it had none
        self.periods = periods_of_rates(list(settings.cameras), list(settings.camera_fps), settings.fps)
        self.stamps = {camera: StampedFrames(keep=PERIOD_GAPS + 1) for camera in settings.cameras}  # lately

    def frame_report(self, prefix: str = "frames.") -> tuple[dict[str, str], int, list[str]]:
        """What the frames matched so far (FrameAges.report), the commands that found no frame of a camera, and
        the cameras slower than their given rate."""
        with self.lock:
            bounds = FrameBounds(self.settings.skew_s, self.settings.frame_max_age)
            self.ages.bounds = {camera: (period, self.stamps[camera].period_s() or math.nan, bounds.oldest_s(period))
                                for camera, period in self.periods.items()}
            return self.ages.report(prefix), self.ages.unmatched(), self.ages.slow()

    @property
    def running(self) -> Episode | None:
        return self.episodes[-1] if self.episodes and self.episodes[-1].end is None else None

    # --- streams (any thread) ------------------------------------------------------------------------------
    def command(self, stamp_s: float, positions: np.ndarray) -> None:
        with self.lock:
            self.recent.append(("command", stamp_s, positions))
            self.newest_command_s = max(self.newest_command_s, stamp_s)
            episode = self._episode_of(stamp_s)
            if episode is not None:
                episode.matcher.add_command(stamp_s, positions)

    def part(self, source: str, stamp_s: float, value) -> None:
        with self.lock:
            self.recent.append((source, stamp_s, value))
            if source in self.stamps:
                self.stamps[source].add(stamp_s, None)
            for episode in self.episodes:  # an ended one may still wait for its last tick's parts
                episode.matcher.add(source, stamp_s, value)

    def set_target(self, stamp_s: float, xy: np.ndarray) -> None:
        with self.lock:
            self.targets.append((stamp_s, np.asarray(xy, float)))

    def _target_of(self, index: int) -> tuple[float, np.ndarray] | None:
        """The newest target point stamped in episode `index`'s time: from its start, before the next one's."""
        start = self.episodes[index].start_s - 1e-6
        end = self.episodes[index + 1].start_s - 1e-6 if index + 1 < len(self.episodes) else math.inf
        return next((t for t in reversed(self.targets) if start <= t[0] < end), None)

    # --- episodes ------------------------------------------------------------------------------------------
    def begin(self, task: str, start_s: float, seed: int | None = None, renderer: str | None = None) -> None:
        """A new episode from `start_s`. One still running is dropped (it never ended), except a sim episode
        (one with a seed): its result and the next start come on different topics, so the start can overtake
        the result. It then waits `end_wait_s` for its result, and is dropped only if none comes."""
        with self.lock:
            running = self.running
            if running is not None and running.seed is not None:
                running.end, running.deadline = OVERTAKEN, self.clock() + self.settings.end_wait_s
            elif running is not None:
                running.end = "discard"
            settings = self.settings
            matcher = FrameMatcher(list(settings.cameras), settings.skew_s, settings.late_s, settings.frame_max_age,
                                   self.periods, self.ages)
            # what came before this start message did; a free-running camera's frames from before the start too,
            # which its first commands may take (the matcher forgets what none takes)
            oldest_part = -math.inf if settings.frame_max_age else start_s - matcher.skew_s
            for source, stamp, value in self.recent:
                if source == "command":
                    if stamp >= start_s - 1e-9:
                        matcher.add_command(stamp, value)
                elif stamp >= oldest_part:
                    matcher.add(source, stamp, value)
            self.episodes.append(Episode(task, start_s, seed, renderer, matcher))

    def end(self, how, seed: int | None = None, at_s: float | None = None) -> Future | None:
        """End the running episode: with its EpisodeResult (kept if it succeeded, or keep_failures), "stop"
        (kept) or "discard". A result ends the episode of its seed, running or overtaken by the next one's start;
        a result for no such episode is ignored. `at_s`: the stamp a stop was asked at (its commands up to it
        still count; it is written as soon as they are all in, not after end_wait_s). The episode's outcome, a
        Future of (kept, what was said), or None when none ended."""
        with self.lock:
            if isinstance(how, str):
                episode = self.running
            else:  # the sim's result: of the running episode, or of one whose successor's start overtook it
                episode = next((e for e in reversed(self.episodes)
                                if (e.end is None or e.end == OVERTAKEN) and e.seed == seed), None)
            if episode is None:
                return None
            episode.end, episode.deadline = how, self.clock() + self.settings.end_wait_s
            if how == "stop" and at_s is not None:  # its ticks end there: a command after it is nobody's
                episode.stop_s = at_s
                episode.matcher.commands = deque(item for item in episode.matcher.commands if item[0] <= at_s)
        return episode.outcome

    # --- writing (one thread) ------------------------------------------------------------------------------
    def write_due(self, drain: bool = False) -> bool:
        """Write the oldest episode's settled frames; end it when it is over (`drain`: an ended one now).
        Whether it ended."""
        use_target = self.settings.use_target
        with self.lock:
            if not self.episodes:
                return False
            episode = self.episodes[0]
            due = drain or self.clock() >= episode.deadline
            if episode.end == OVERTAKEN:
                done = due  # its result did not come in time: dropped
            else:
                done = episode.end == "discard" or (episode.end is not None and (due or self._all_in(episode)))
            target = self._target_of(0)
            fresh = target is not None
            if use_target and not fresh and not done:
                return False  # its frames wait for the episode's target point
            waiting = episode.end in ("discard", OVERTAKEN) or (use_target and not fresh)
            frames = [] if waiting else episode.matcher.frames(flush=done)
            # stopped at a known stamp: over once every command up to it is in and written
            done = done or (not waiting and episode.stop_s is not None and self.newest_command_s >= episode.stop_s
                            and not episode.matcher.commands)
            given_up = episode.matcher.counts.given_up
            if done:
                self.episodes.pop(0)
        if frames and self.writer is None:
            self.writer = self._open(episode, frames[0])
        if self.writer is not None and frames:
            if not episode.opened:
                self.writer.start(episode.task)
                episode.opened = True
            for frame in frames:
                self.writer.add(frame, target[1] if use_target else None)
        if done:
            self._end(episode, given_up)
        return done

    def close(self) -> None:
        """Drop the episode that never ended, write the ended ones, finalize the dataset (LeRobot loads it)."""
        with self.lock:
            if self.running is not None:
                self.running.end = "discard"  # never half an episode
        try:
            while self.write_due(drain=True):
                pass
        finally:
            if self.writer is not None:
                self.writer.close()

    def _episode_of(self, stamp_s: float) -> Episode | None:
        """The episode a command of this stamp is a tick of: the running one from its start, or a sim episode
        already ended whose ticks include it. Commands and the result come on different topics, so a result
        can overtake its episode's last commands (a bag of the graph had 4 after it), which its end wait expects."""
        for episode in reversed(self.episodes):
            if stamp_s < episode.start_s - 1e-9:
                continue  # an earlier episode's
            if episode.end is None or episode.end == OVERTAKEN:  # bounded by the next episode's start
                return episode
            if episode.end == "stop" and episode.stop_s is not None:  # its ticks: up to the stop
                return episode if stamp_s <= episode.stop_s else None
            if isinstance(episode.end, str):  # stopped or discarded: no tick count to bound it
                return None
            return episode if stamp_s <= self._last_tick_s(episode) + episode.matcher.skew_s else None
        return None

    def _last_tick_s(self, episode: Episode) -> float:
        """The stamp of a sim episode's last tick, from its result's steps."""
        return episode.start_s + (episode.end.steps - 1) / self.settings.fps

    def _all_in(self, episode: Episode) -> bool:
        """A sim episode's every command and every part of its last tick are here (its result gives the steps)."""
        if isinstance(episode.end, str):
            return False
        matcher, last = episode.matcher, self._last_tick_s(episode)
        commands = matcher.counts.complete + matcher.counts.given_up + len(matcher.commands)
        return commands >= episode.end.steps and all(
            buffer and buffer.newest_stamp() >= last - matcher.skew_s for buffer in matcher.parts.values())

    def _end(self, episode: Episode, given_up: int) -> None:
        failed = not isinstance(episode.end, str) and not episode.end.success
        kept = episode.end not in ("discard", OVERTAKEN) and not (failed and not self.settings.keep_failures)
        if not kept or not episode.opened:
            if episode.opened:
                self.writer.discard()
            why = "it failed" if failed else "discarded" if episode.end == "discard" else \
                "the next episode started and its result never came" if episode.end == OVERTAKEN else \
                "no complete frame"
            self._report(episode, f"episode not kept: {why}")
            return
        lacked = dict(episode.matcher.counts.incomplete)  # given-up frames by the part they lacked
        if not isinstance(episode.end, str):  # the sim said how many ticks it had: a command never heard counts too
            unheard = episode.end.steps - self.writer.frames - given_up
            if unheard > 0:
                lacked["command never heard"] = unheard
                given_up += unheard
        lacking = f": {', '.join(f'{part} {n}' for part, n in sorted(lacked.items()))}" if lacked else ""
        try:
            frames = self.writer.save(episode.seed, given_up)
        except EpisodeDropped as why:
            self.dropped += 1
            self._report(episode, f"episode dropped: {why} (lacking{lacking or ' nothing named'})", error=True)
            return
        except OSError as error:
            self.writer.discard()
            self.dropped += 1
            full = "the disk is full" if error.errno == errno.ENOSPC else str(error)
            self._report(episode, f"episode dropped: {full} (free some space; the dataset keeps its "
                                  f"{self.writer.episodes} finished episodes)", error=True)
            return
        self.saved += 1
        self._report(episode, f"episode saved: {frames} frames ({given_up} incomplete{lacking}), "
                              f"{self.writer.episodes} in the dataset", kept=True)

    def _open(self, episode: Episode, frame: Frame) -> DemonstrationWriter:
        """The dataset, made (or resumed) at the first complete frame: the image sizes are its."""
        from act_node.record import DatasetSpec

        settings = self.settings
        sizes = {camera: tuple(image.shape[:2]) for camera, image in frame.images.items()}
        spec = DatasetSpec.of_cameras(sizes, int(round(settings.fps)), renderer=episode.renderer,
                                      robot_type=settings.robot_type, environment_state=settings.use_target,
                                      environment_layout=settings.environment_layout)
        return DemonstrationWriter(spec, settings.repo_id, settings.root, resume=settings.resume,
                                   max_incomplete=settings.max_incomplete,
                                   image_writer_threads=settings.image_writer_threads)

    def _report(self, episode: Episode, text: str, error: bool = False, kept: bool = False) -> None:
        seed = f" (seed {episode.seed})" if episode.seed is not None else ""
        self.say(f"{episode.task}{seed}: {text}", error)
        episode.outcome.set_result((kept, f"{episode.task}{seed}: {text}"))
