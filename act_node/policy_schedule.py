"""The policy node's schedule without ROS: which observation is due, which is refused and why, when the time
jumped back, and what /diagnostics says, so that act_node.nodes.policy_node stays ROS plumbing and the tests
drive the same code.

    begin(start_s, task, on_clock)  end()      a run from `start_s` (episode/start, act/run), or none
    add_image  add_joints  set_target           what the callbacks store (any thread), under `lock`
    ahead_of_clock(source, stamp)               a message stamped more than ahead_s after the clock: refused
    clock_jumped(back_s)                        the clock went back: the run's state resets
    take_due()                                  the inference thread: the newest due observation, marked answered
    inferred()  sent()  failed()                what became of it, counted in `stats`
    fill(report, recent)                        /diagnostics' content (report: act_node.nodes.diagnostics.Report)

Each joint state takes each camera's newest frame not stamped after it (beyond `skew_s`) nor older than
`frame_max_age` of that camera's periods (act_node.observation.FrameBounds; 0: only frames of its own stamp, the
sim's). In `every_n` mode (the default, and what the sim and arm graphs run) one observation is answered in each
block of `replan_every` ticks from the episode's start, the block's first there is (lockstep: the sim waits for
exactly those); in `latest` mode the newest complete observation whenever the node is free.

Inputs that stop or lie are refused, never answered: an observation whose camera frames are stamped more
than `ahead_s` after its joint states (or the clock), a camera or joint_states silent for `stale_s` while an
observation waits for it, an observation more than `stale_s` behind the newest joint state or the clock. Each
refusal is counted by reason on /diagnostics, and logged once per onset. The stamps going back by more than
`jump_back_s` (a `ros2 bag play --loop`, a sim that restarted) reset the run's state: the matcher, the policy's
queue and the answered stamp; the run goes on from the new time (or from the next episode/start).

`log` is the node's logger (info, warn, error, with throttle_duration_sec); `clock()` the node's clock as
(ros_time_is_active, now in seconds); `monotonic()` the wall time that silences are measured in.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from act_node.observation import FrameAges, ObservationMatcher, periods_of_rates


@dataclass
class PolicyStats:
    """What the node counts for /diagnostics (under the schedule's lock)."""

    inferences: int = 0
    inference_last_s: float = 0.0
    inference_total_s: float = 0.0
    inference_max_s: float = 0.0
    inference_failures: int = 0
    last_failure: str = ""
    chunks_sent: int = 0
    chunks_resent: int = 0  # to an observation said again (lockstep)
    chunks_dropped: int = 0  # computed for a run that ended meanwhile
    skipped: int = 0  # due observations passed over for a newer one (realtime)
    refused: Counter = field(default_factory=Counter)  # observations and messages refused, by reason
    last_refusal: str = ""
    bad_messages: Counter = field(default_factory=Counter)  # by source: undecodable, wrong size, NaN, names
    clock_jumps: int = 0


class Due(NamedTuple):
    """An observation to answer: its stamp, its parts, the run's task, target and start, the run's number, whether
    the policy's queue must be reset before it (a run's first answer), and the run's objects (scene/objects: (stamp,
    [(kind, x, y, yaw)])) when the checkpoint plans a grasp among them, else None."""

    stamp: float
    parts: dict
    task: str
    target: tuple | None
    run: float
    serial: int
    reset: bool
    scene: tuple | None = None


def stamp_matcher(cameras: list[str], listed: list[str], camera_fps: list[float], fps: float, skew_s: float,
                  frame_max_age: float) -> ObservationMatcher:
    """The matcher of the joint states and `cameras` (those subscribed to), each camera's period from
    `camera_fps` in the order of `listed` (the parameter 'cameras'; [0.0]: fps for every camera)."""
    rates = [float(rate) for rate in camera_fps]
    periods = periods_of_rates(list(listed), [] if rates == [0.0] else rates, float(fps))
    return ObservationMatcher(["joints", *cameras], float(skew_s), max_age=float(frame_max_age),
                              periods={camera: periods[camera] for camera in cameras})


class PolicySchedule:
    def __init__(self, matcher: ObservationMatcher, cameras: list[str], fps: float, replan_every: int,
                 infer_mode: str, stale_s: float, ahead_s: float, jump_back_s: float, wants_target: bool,
                 log, clock: Callable[[], tuple[bool, float]], monotonic: Callable[[], float] = time.monotonic,
                 target_topic: str = "target/point", wants_scene: bool = False, scene_topic: str = "scene/objects"):
        self.matcher, self.cameras, self.fps = matcher, list(cameras), float(fps)
        self.replan_every, self.infer_mode, self.wants_target = int(replan_every), infer_mode, wants_target
        self.stale_s, self.ahead_s, self.jump_back_s = float(stale_s), float(ahead_s), float(jump_back_s)
        self.log, self.clock, self.monotonic, self.target_topic = log, clock, monotonic, target_topic
        self.wants_scene, self.scene_topic = wants_scene, scene_topic  # a grasp planned among the run's objects
        self.scene: tuple[float, list] | None = None
        self.lock = threading.Lock()  # the matcher, the run and the target, between callbacks and the thread
        # each joint state's frames (the matcher's ages: how old each camera's was, or none), and the frames of the
        # observations answered
        self.ticks, self.answered_ages = matcher.ages, FrameAges()
        self.stats = PolicyStats()
        self.target: tuple[float, object] | None = None
        self.episode_start_s: float | None = None
        self.task = ""
        self.runs = 0  # runs begun (begin()): the yaw read belongs to one
        self.answered_s = -math.inf
        self.answer: tuple[float, bytes] | None = None  # the last chunk sent and its observation's stamp
        self._answered_in_run = False  # a chunk went out for the run (episode) under way
        self._reset_policy = False
        self._run_on_clock = False  # the run was started from this node's clock: stamps are on its time
        self._run_since = monotonic()  # wall time the run began (silence of a source never heard)
        self._heard: dict[str, float] = {}  # source -> wall time (monotonic) of its last message
        self._newest_joints_s = -math.inf  # the newest joint state's stamp: a jump back is measured from it
        self._waiting_since: float | None = None  # wall time since which due observations lack a part
        self._refused_s = -math.inf  # the newest observation stamp refused (each is counted once)
        self._refused_since_answer = 0
        self._onset: str | None = None  # the reason last logged: one line per onset, not per message
        self._waiting_for_target = self._waiting_for_scene = False

    @classmethod
    def of_parameters(cls, values: dict, cameras: list[str], replan_every: int, wants_target: bool, log,
                      clock: Callable[[], tuple[bool, float]], wants_scene: bool = False) -> PolicySchedule:
        """The schedule of the policy node's parameters (`values`), its matcher that of the joint states and
        `cameras` (those subscribed to)."""
        matcher = stamp_matcher(cameras, values["cameras"], values["camera_fps"], values["fps"], values["skew_s"],
                                values["frame_max_age"])
        return cls(matcher, cameras, values["fps"], replan_every, values["infer"], values["stale_s"],
                   values["ahead_s"], values["jump_back_s"], wants_target, log, clock, wants_scene=wants_scene)

    # --- runs and what the callbacks store ------------------------------------------------------------
    def begin(self, start_s: float, task: str, on_clock: bool = False) -> None:
        """A run (an episode) from `start_s`: the policy's queue and the matcher start empty. `on_clock`: the
        start was read from the node's clock (an arm's run), so stamps are checked against it."""
        with self.lock:
            self.episode_start_s, self.task = start_s, task
            self.runs += 1  # a new run: the yaw is read again at its first observation
            self._run_on_clock, self._run_since = on_clock, self.monotonic()
            self.matcher.clear()
            self._newest_joints_s = -math.inf
            self._waiting_since, self._refused_s, self._refused_since_answer = None, -math.inf, 0
            self.answer = None
            self.answered_s = self.episode_start_s - 1.0 / self.fps
            self._reset_policy = True  # on the inference thread, before its next answer
            self._answered_in_run = False

    def end(self) -> None:
        with self.lock:
            self.episode_start_s = None

    def set_target(self, target: tuple[float, object]) -> None:
        with self.lock:
            self.target = target

    def set_scene(self, scene: tuple[float, list]) -> None:
        with self.lock:
            self.scene = scene

    def bad_message(self, source: str) -> None:
        with self.lock:
            self.stats.bad_messages[source] += 1

    def add_image(self, camera: str, stamp: float, image) -> None:
        with self.lock:
            self._heard[camera] = self.monotonic()
            self.matcher.add(camera, stamp, image)

    def add_joints(self, stamp: float, positions) -> bytes | None:
        """Store a joint state; the chunk already sent for its stamp when it is said again (lockstep: the chunk
        was lost), which is then not stored. Joint states stamped jump_back_s before the newest restart the run."""
        with self.lock:
            self._heard["joints"] = self.monotonic()
            back = self._newest_joints_s - stamp
            jumped = back > self.jump_back_s
            if jumped:
                self.restart_locked(stamp)
            self._newest_joints_s = max(self._newest_joints_s, stamp)
            answer = self.answer if self.answer is not None and self.answer[0] == stamp else None
            if answer is None:
                self.matcher.add("joints", stamp, positions)
            else:
                self.stats.chunks_resent += 1
        if jumped:
            self._say_restart(f"the joint states' stamps went back {back:.3f} s", stamp)
        return None if answer is None else answer[1]

    # --- the time: the clock, and going back ----------------------------------------------------------
    def clock_s(self) -> float | None:
        """The node's clock when the stamps are on its time (ROS time from /clock, or a run started from the
        clock, as on an arm), else None: a sim's stamps without use_sim_time are on another time."""
        active, now = self.clock()
        if not (active or self._run_on_clock):
            return None
        return now if now > 0 else None  # ROS time before the first /clock message reads 0

    def ahead_of_clock(self, source: str, stamp: float) -> bool:
        """Whether a message is stamped more than ahead_s after the clock: impossible, refused (and counted)."""
        now = self.clock_s()
        if now is None or stamp - now <= self.ahead_s:
            return False
        with self.lock:
            self.refuse_locked(None, f"{source} ahead", f"{source} stamped {stamp - now:.3f} s ahead of the clock")
        return True

    def clock_jumped(self, back_s: float) -> bool:
        """The node's clock went back by `back_s` (more than jump_back_s: ROS time from /clock, a bag played in a
        loop); whether the run's state was reset (not when the joint states' stamps showed it first)."""
        now_s = self.clock()[1]
        with self.lock:
            if self._newest_joints_s <= now_s + self.jump_back_s:
                return False  # the joint states' stamps went back first: already restarted on the new time
            self.restart_locked(now_s)
            self._newest_joints_s = -math.inf  # the next joint state starts the new time
        self._say_restart(f"the clock went back {back_s:.3f} s", now_s)
        return True

    def restart_locked(self, start_s: float) -> None:
        """The time went back: forget every stamp of the old time (all but the parts of the observation at
        `start_s`, which may have come before the joint state that showed the jump); the run, if any, goes on
        from `start_s`."""
        self.stats.clock_jumps += 1
        self.matcher.forget(lambda at: abs(at - start_s) > self.matcher.skew_s)
        self.answer = None
        self._waiting_since, self._refused_s, self._refused_since_answer = None, -math.inf, 0
        self._newest_joints_s = start_s
        if self.episode_start_s is not None:
            self.episode_start_s = start_s
            self.answered_s = start_s - 1.0 / self.fps
            self._reset_policy = True  # on the inference thread, before its next answer
            self._answered_in_run = False
        else:
            self.answered_s = -math.inf

    def _say_restart(self, why: str, start_s: float) -> None:
        # throttled: two publishers of one topic on different times (a bag played beside a live driver) jump
        # back and forth at their rate; the count is on /diagnostics (time_jumps_back)
        self.log.warn(f"{why} (to t={start_s:.3f} s): the time jumped back; the matcher, the policy's "
                      f"queue and the answered stamp are reset" +
                      (f", the run goes on from t={start_s:.3f} s" if self.episode_start_s is not None
                       else ""), throttle_duration_sec=2.0)

    # --- what is due ------------------------------------------------------------------------------------
    def tick(self, stamp: float) -> int:
        return round((stamp - self.episode_start_s) * self.fps)

    def slot(self, stamp: float) -> float:
        """every_n: the block of replan_every ticks (from the run's start) a stamp falls in; latest: the stamp."""
        return stamp if self.infer_mode == "latest" else self.tick(stamp) // self.replan_every

    def due(self, stamp: float) -> bool:
        """every_n: an observation in a later block of replan_every ticks than the last answer's, so the answers
        stand replan_every ticks apart, as the checkpoint's n_action_steps says (1, every tick, when it ensembles).
        A lockstep sim waits on each block's first tick, so that one is answered; on an arm, whose joint states come
        on a wall-clock timer, a block's first tick may be late or missing, and the block's next observation is
        answered instead of none until the block after. Before the run's first answer, any tick: a lockstep sim
        holds a tick each lockstep_timeout_s while nothing answers, and a policy that comes up after that (a
        checkpoint loading slower than the timeout on a busy machine, or started after the sim, as ros2 launch may)
        answers the tick the sim waits on, instead of waiting for the next block while the sim holds one tick each
        timeout."""
        return not self._answered_in_run or self.slot(stamp) > self.slot(self.answered_s)

    def take_due(self) -> Due | None:
        """The newest due, complete observation not yet answered, marked answered; None when there is none (or
        the target for this episode has not come). `reset`: reset the policy before answering it."""
        with self.lock:
            if self.episode_start_s is None:
                return None
            found = self.matcher.newest(after_s=self.answered_s, accept=self.due)
            if found is None:
                self.explain_missing()
                return None
            stamp, parts = found
            stale = self.stale(stamp)
            if stale is not None:  # complete but too old (or ahead of the clock): refused, never answered
                self.refuse_locked(stamp, *stale)
                self.answered_s = stamp
                return None
            target, scene = self.target, self.scene if self.wants_scene else None
            self._waiting_for_target = self.wants_target and (target is None
                                                              or target[0] < self.episode_start_s - 1e-6)
            if self._waiting_for_target:
                self.log.warn(f"waiting for {self.target_topic} for this episode", throttle_duration_sec=2.0)
                return None
            self._waiting_for_scene = self.wants_scene and (scene is None or scene[0] < self.episode_start_s - 1e-6)
            if self._waiting_for_scene:
                self.log.warn(f"waiting for {self.scene_topic} for this episode (the grasp is planned among its "
                              f"objects)", throttle_duration_sec=2.0)
                return None
            reset, self._reset_policy = self._reset_policy, False
            passed = len({self.slot(s) for s, _ in self.matcher.buffers["joints"]
                          if self.answered_s < s < stamp and self.due(s)} - {self.slot(stamp)})
            self.stats.skipped += max(0, passed - self._refused_since_answer)
            self._refused_since_answer, self._waiting_since = 0, None
            if self._onset is not None:
                self.log.info(f"answering again from t={stamp:.3f} s (after: {self._onset})")
                self._onset = None
            self.answered_s, self._answered_in_run = stamp, True
            for camera, part in self.matcher.match(stamp).items():
                self.answered_ages.add(camera, stamp - part[0])
            return Due(stamp, parts, self.task, target, self.episode_start_s, self.runs, reset, scene)

    def stale(self, stamp: float) -> tuple[str, str] | None:
        """(reason, why) when the complete observation of `stamp` is too old or ahead of the clock, else None."""
        behind = self._newest_joints_s - stamp
        if behind > self.stale_s:  # complete only with old joint states: a camera lags
            newest = {c: self.matcher.newest_stamp(c) for c in self.cameras}
            lagging = [c for c, at in newest.items() if at is None or at < self._newest_joints_s - self.stale_s]
            return (f"{(lagging or ['observation'])[0]} stale",
                    f"the observation at t={stamp:.3f} s is {behind:.3f} s behind the joint states")
        now = self.clock_s()
        if now is not None and now - stamp > self.stale_s:
            return "observation stale", f"the observation at t={stamp:.3f} s is {now - stamp:.3f} s behind the clock"
        if now is not None and stamp - now > self.ahead_s:
            return "observation ahead", f"the observation at t={stamp:.3f} s is {stamp - now:.3f} s ahead of the clock"
        return None

    def explain_missing(self) -> None:
        """No complete due observation: when one is due but a part is missing, say which and why (a frame
        stamped ahead: at once; a part stale or silent: once it has waited stale_s), counted once per stamp."""
        stamp = self.matcher.newest_anchor(after_s=self.answered_s, accept=self.due)
        if stamp is None:
            return
        now = self.monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
        waited = now - self._waiting_since
        silent = {source: now - self._heard.get(source, self._run_since) for source in ("joints", *self.cameras)}
        problem = None
        for camera, offset in self.matcher.misses(stamp).items():  # the cameras with no frame for it
            ahead = (self.matcher.newest_stamp(camera) or stamp) - stamp  # its newest frame: after the joint states?
            if ahead > self.ahead_s and silent["joints"] <= self.stale_s:
                problem = (f"{camera} ahead", f"camera {camera}'s newest frames are stamped {ahead:.3f} s ahead of "
                           f"the joint states of t={stamp:.3f} s")
                self.matcher.forget(lambda at, limit=stamp + self.ahead_s: at > limit, camera)  # impossible
                break
            if waited <= self.stale_s:
                continue
            if offset is not None and offset > 0 and silent["joints"] > self.stale_s:  # frames after, joints silent
                problem = ("joint_states stale", f"no joint states for {silent['joints']:.1f} s")
            else:  # none at all, only later ones (it was silent then), or only ones older than the bound
                bound = (f"older than its bound of {self.matcher.oldest_s(camera):.3f} s: skew_s and frame_max_age "
                         f"{self.matcher.bounds.max_age:g} periods of {self.matcher.periods[camera] * 1e3:.0f} ms")
                nearest = "no frame" if offset is None else f"its nearest frame {offset:.3f} s after" if offset > 0 \
                    else f"its newest frame {-offset:.3f} s before, {bound}"
                how = f"silent for {silent[camera]:.1f} s" if silent[camera] > self.stale_s else \
                    "publishing, but no frame for them"
                problem = (f"{camera} stale", f"camera {camera} {how} ({nearest} the joint states of t={stamp:.3f} s)")
            break
        if problem is not None:
            self.refuse_locked(stamp, *problem)

    def refuse_locked(self, stamp: float | None, reason: str, why: str) -> None:
        """Count a refused observation (once per stamp; None: a message) and log it once per onset."""
        if stamp is not None:
            if stamp <= self._refused_s:
                return
            self._refused_s = stamp
            self._refused_since_answer += 1
        self.stats.refused[reason] += 1
        self.stats.last_refusal = why
        if self._onset != reason:
            self._onset = reason
            self.log.warn(f"no chunk: {why} (refused: {reason}; said once until it changes or clears)")

    # --- what became of an answer -----------------------------------------------------------------------
    def inferred(self, stamp: float, took: float, run: float) -> bool:
        """An inference of `took` s for the observation of `stamp` in the run from `run`: whether its chunk is
        still for now (not when the run ended or another began while it thought: then it is dropped)."""
        with self.lock:
            stats = self.stats
            stats.inferences += 1
            stats.inference_last_s, stats.inference_total_s = took, stats.inference_total_s + took
            stats.inference_max_s = max(stats.inference_max_s, took)
            if self.episode_start_s != run:
                stats.chunks_dropped += 1
                self.log.info(f"dropped the chunk for t={stamp:.3f} s: its run is over")
                return False
        return True

    def sent(self, stamp: float, data: bytes) -> None:
        with self.lock:
            self.answer = (stamp, data)
            self.stats.chunks_sent += 1

    def failed(self, error: BaseException) -> None:
        with self.lock:
            self.stats.inference_failures += 1
            self.stats.last_failure = repr(error)

    # --- /diagnostics -------------------------------------------------------------------------------------
    def fill(self, report, recent: Callable[[str, float], float]) -> None:
        """What the node did and why it answers nothing, if it does not, into `report`; `recent(key, total)`: how
        much a running count grew over the last reports (act_node.nodes.diagnostics.Diagnostics.recent)."""
        now = self.monotonic()
        with self.lock:
            stats, run = self.stats, self.episode_start_s
            refused = sum(stats.refused.values())
            silent = {source: now - self._heard[source] if source in self._heard else None
                      for source in ("joints", *self.cameras)}
            waiting = self._waiting_since is not None and now - self._waiting_since > self.stale_s
            target, scene = self._waiting_for_target, self._waiting_for_scene
            self.ticks.bounds = self.answered_ages.bounds = {
                camera: (self.matcher.periods[camera], self.matcher.measured_period_s(camera) or math.nan,
                         self.matcher.oldest_s(camera)) for camera in self.cameras}
            slow = self.ticks.slow()
            ticks, answered = self.ticks.report("frames."), self.answered_ages.report("answered.")
            unmatched = self.ticks.unmatched()
        names = {"joints": "joint_states", **{c: f"camera/{c}" for c in self.cameras}}
        stale = [names[s] for s, quiet in silent.items() if run is not None and (quiet is None or quiet > self.stale_s)
                 and (s == "joints" or waiting)]
        failed, refused_now = recent("failures", stats.inference_failures), recent("refused", refused)
        jumped = recent("jumps", stats.clock_jumps)
        if failed:
            report.error(f"inference failed: {stats.last_failure}")
        if refused_now:
            report.warn(f"refused {refused_now:g} observations recently: {stats.last_refusal}")
        if stale:
            report.warn(f"stale inputs: {', '.join(stale)}")
        if jumped:
            report.warn("the time jumped back: the run's state was reset")
        if slow and self.matcher.bounds.max_age:
            report.warn(f"cameras slower than camera_fps: {'; '.join(slow)}")
        missed = recent("unmatched", unmatched)
        if missed:
            report.warn(f"{missed:g} joint states recently matched no frame of a camera (frames.<camera>.unmatched)")
        if target:
            report.warn(f"waiting for {self.target_topic}")
        elif scene:
            report.warn(f"waiting for {self.scene_topic}")
        mean = stats.inference_total_s / stats.inferences if stats.inferences else 0.0
        report.update({
            "run": "none" if run is None else f"from t={run:.3f} s", "task": self.task, "infer": self.infer_mode,
            "inferences": stats.inferences, "inference_last_ms": stats.inference_last_s * 1e3,
            "inference_mean_ms": mean * 1e3, "inference_max_ms": stats.inference_max_s * 1e3,
            "inference_failures": stats.inference_failures, "last_failure": stats.last_failure,
            "chunks_sent": stats.chunks_sent, "chunks_resent": stats.chunks_resent,
            "chunks_dropped": stats.chunks_dropped, "observations_skipped": stats.skipped,
            "observations_refused": refused, "refused": stats.refused, "last_refusal": stats.last_refusal,
            "bad_messages": stats.bad_messages, "time_jumps_back": stats.clock_jumps,
            "stale_inputs": ", ".join(stale) or "none",
        })
        for source, quiet in silent.items():
            report.add(f"{names[source]}.silent_s", "never heard" if quiet is None else f"{quiet:.2f}")
        # each joint state's frames once no later frame could change them (frames.*), and those of the observations
        # answered (answered.*)
        report.update({**ticks, **answered})
