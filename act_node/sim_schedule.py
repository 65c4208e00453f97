"""The sim node's schedule without ROS: when a lockstep sim says its observation again, holds, or counts a policy
as gone; which chunks came from a restarted driver; when the first episode may start; what an interrupted episode
reports; what /diagnostics says; which run-time parameter changes it takes. act_node.nodes.sim_node stays ROS
plumbing, and tests/test_sim_schedule.py drives this code without a ROS graph.

    episode_started()                     a new episode waits lockstep_timeout_s again, no restart counted yet
    chunk_heard(sequence, running, episode)   a chunk's publication number: a new publisher is a restarted driver
    chunk_rejected()  chunk_merged(dropped, stamp_s, now_s)   what became of it, counted
    stepped(held, reason)                 a tick ran: the wait starts again, a hold is counted by reason
    resumed()                             actions came again after a stall: how many ticks were held
    waiting(now_s, episode) -> Wait       lockstep, every republish_s: say it again, or hold how many ticks
    hold(wait, steppable, step)           those ticks, held while nothing comes
    judged(result) -> EpisodeResult       an episode the policy did not drive as one run is not its success
    fill(report, recent, sim)             /diagnostics' content (report: act_node.nodes.diagnostics.Report)

Lockstep waits for the action of each tick. Before the first chunk (the policy loads its checkpoint) it holds one
tick each `lockstep_timeout_s` of wall time; after it, `lockstep_timeout_s` without an action (a policy that died)
it says so once and holds the arm at fps until actions come again: never a hang, and the episode counts as failed.
`log` is the node's logger (info, warn, debug, with throttle_duration_sec); `monotonic()` the wall time.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from act_node.chunks import MERGE_RULES
from act_node.config import GraphConfig
from act_node.episodes import EpisodeResult

# what `ros2 param set` changes while the sim runs: the executor reads these at every tick
CHANGEABLE = ("merge", "ensemble_coeff", "max_velocity", "stale_after_s")
SLOW_REALTIME = 0.9  # clock:=realtime stepping slower than this share of the wall clock is a warning


@dataclass
class SimCounts:
    """What the sim node counts over its life, for /diagnostics."""

    chunks_received: int = 0
    chunks_rejected: int = 0
    late_chunks: int = 0  # chunks whose first steps were already past when they arrived
    late_steps: int = 0
    earlier_episode_chunks: int = 0  # answers to an earlier episode's observation, come after it ended: not queued
    holds: Counter = field(default_factory=Counter)  # held ticks by reason
    clamped_ticks: int = 0  # of the finished episodes (the running one: SimEpisodes.clamped_ticks)
    episodes_done: int = 0
    successes: int = 0
    lockstep_timeouts: int = 0  # ticks held because no action came within lockstep_timeout_s


class Wait(NamedTuple):
    """What a lockstep sim does while no action is in: say the observation again, or hold up to `hold` ticks
    (`stalled`: each held tick counts against the episode)."""

    republish: bool = False
    hold: int = 0
    stalled: bool = False


def started(executor, values: dict) -> None:
    """The executor's stale_after_s and ensemble_coeff from the sim's parameters at start; ValueError for one a
    running sim would refuse."""
    for name in ("stale_after_s", "ensemble_coeff"):
        problem = change_problem(name, values[name])
        if problem:
            raise ValueError(problem)
        apply_change(executor, name, values[name])


def sim_config(values: dict, names: Sequence[str]) -> GraphConfig:
    """The sim's configuration from its parameters `values` (`names`: those GraphConfig takes; replan_every 0: the
    checkpoint's); ValueError for a leader without the wall clock."""
    if values["command_source"] == "leader" and values["clock"] != "realtime":
        raise ValueError("command_source:=leader needs clock:=realtime: a person on a leader arm moves in real "
                         "time, and a lockstep sim would wait for chunks that never come")
    replan = int(values["replan_every"]) or None
    return GraphConfig(**{name: values[name] for name in names if name != "replan_every"},
                       **({"replan_every": replan} if replan else {}))


def video_said(log) -> Callable[[object, Exception | None], None]:
    """act_node.stepping.VideoWriter's on_written: the node's log says where each video went, or why not."""

    def said(path, error: Exception | None) -> None:
        if error is None:
            log.info(f"video: {path}")
        else:
            log.error(f"could not write the video {path}: {error}")

    return said


def result_line(result: EpisodeResult) -> str:
    """The log's line for an ended episode."""
    error = result.target_error_m
    target = "no target point" if error is None else f"target {error * 100:.1f} cm off"
    return (f"episode {result.episode} {'succeeded' if result.success else 'failed'} after {result.steps} steps "
            f"(reward {result.sum_reward:.2f}, held {result.held_ticks} ticks, clamped {result.clamped_ticks} ticks, "
            f"{target})")


def change_problem(name: str, value) -> str | None:
    """Why a running sim refuses `name` := `value`, or None. merge auto is resolved once, at start, from the
    checkpoint (GraphConfig.chunk_merge): a running sim takes a rule."""
    if name == "merge" and value not in MERGE_RULES:
        return f"parameter merge must be one of {', '.join(MERGE_RULES)}, got {value!r}"
    if name == "ensemble_coeff" and not math.isfinite(value):
        return f"parameter ensemble_coeff must be finite, got {value}"
    return None


def apply_change(executor, name: str, value) -> bool:
    """Set a changeable parameter on the chunk executor; False for one it does not read."""
    if name == "merge":
        executor.merge = value
    elif name == "ensemble_coeff":
        executor.ensemble_coeff = float(value)
    elif name == "max_velocity":
        executor.max_velocity[:] = float(value)
    elif name == "stale_after_s":
        executor.stale_after_s = float(value)
    else:
        return False
    return True


def subscribers_ready(awaited: Sequence[str], streams: Iterable[tuple[Sequence[str], int]]) -> bool:
    """Whether every awaited node subscribes every stream, given for each stream the names of the nodes that
    subscribe it and how many subscriptions its publisher has matched. The graph names a node's subscription before
    the publisher has matched it (seen under load: the recorder listed, a lockstep episode of 0.4 s published into
    nothing, "no complete frame"), so the publisher must also count as many matches as the awaited nodes hold."""
    for names, matched in streams:
        mine = [name for name in names if name in awaited]
        if not set(awaited) <= set(mine) or matched < len(mine):
            return False
    return True


class StartGate:
    """When the first episode may start by itself: once the nodes named in `await_subscriber` (comma-separated)
    subscribe every stream a recorder takes, (command_source:=leader) once the leader is heard, and (`await_driver`)
    once a driver publishes chunks."""

    def __init__(self, await_subscriber: str, leader: bool, await_driver: bool):
        self.awaited = [name.strip() for name in await_subscriber.split(",") if name.strip()]
        # a person on a leader arm: the first episode starts once the leader is heard, not while its node starts
        self.leader_heard = not leader
        self.await_driver = bool(await_driver) and not leader

    def waits(self) -> list[str]:
        """What the first episode waits for, in words ([]: nothing, it starts at once)."""
        streams = "act/joint_command, joint_states and the cameras"
        waits = [f"{', '.join(self.awaited)} on {streams}"] if self.awaited else []
        waits += [] if self.leader_heard else ["the leader arm on leader/joint_states"]
        return waits + (["a driver (the policy, the expert) on act/action_chunk"] if self.await_driver else [])

    def ready(self, driver_publishes: Callable[[], bool], streams: Callable[[], Iterable]) -> bool:
        """`driver_publishes()`: whether a node publishes chunks; `streams()`: subscribers_ready's streams."""
        if not self.leader_heard or (self.await_driver and not driver_publishes()):
            return False
        return subscribers_ready(self.awaited, streams())


class SimSchedule:
    def __init__(self, fps: float, lockstep_timeout_s: float, log, monotonic: Callable[[], float] = time.monotonic):
        self.fps, self.lockstep_timeout_s, self.log, self.monotonic = fps, lockstep_timeout_s, log, monotonic
        self.counts = SimCounts()
        self.waiting_since = monotonic()
        self.stalled: tuple[float, int] | None = None  # lockstep with no action: (since, ticks held since)
        self.heard_driver = False  # a chunk came since the node started (before: the policy is still loading)
        self.chunk_sequence = 0  # the last chunk's publication sequence number (a new publisher starts at 1)
        self.driver_restarts = 0
        self.episode_restart = 0  # the episode in which the driver restarted (0: none)
        self.episode_stalled = 0  # ticks of this episode held that way
        self._factor_window = (monotonic(), 0)  # wall time and tick of the last report

    def episode_started(self) -> None:
        self.stalled, self.episode_stalled, self.episode_restart = None, 0, 0

    # --- chunks ------------------------------------------------------------------------------------------
    def chunk_heard(self, sequence: int, running: bool, episode: int) -> None:
        """A chunk of publication number `sequence` (0: unknown) came while `episode` runs (or none)."""
        self.counts.chunks_received += 1
        self.heard_driver = True
        if sequence and self.chunk_sequence and sequence <= self.chunk_sequence:
            # a publisher's numbers only grow: this is another one, the driver started again (respawned)
            self.driver_restarts += 1
            if running and not self.episode_restart:
                self.episode_restart = episode
                self.log.warn(f"the chunks come from a new publisher (sequence {self.chunk_sequence} then "
                              f"{sequence}): the policy restarted; episode {episode} counts as failed")
        self.chunk_sequence = sequence or self.chunk_sequence

    def chunk_rejected(self) -> None:
        self.counts.chunks_rejected += 1

    def chunk_merged(self, dropped: int | None, stamp_s: float, now_s: float) -> bool:
        """SimEpisodes.policy_chunk's answer for a chunk of `stamp_s` come at `now_s`: None for an earlier episode's
        chunk (not queued: False), else its steps already past."""
        if dropped is None:
            self.counts.earlier_episode_chunks += 1
            self.log.debug(f"chunk for t={stamp_s:.3f} s answers an earlier episode: not queued")
            return False
        if dropped:
            self.counts.late_chunks += 1
            self.counts.late_steps += dropped
            self.log.debug(f"chunk for t={stamp_s:.3f} s arrived at t={now_s:.3f} s: {dropped} steps past")
        return True

    # --- ticks -------------------------------------------------------------------------------------------
    def stepped(self, held: bool, reason: str) -> None:
        self.waiting_since = self.monotonic()
        if held:
            self.counts.holds[reason] += 1

    def resumed(self) -> int | None:
        """Actions are in again: the ticks held while stalled (None: it was not)."""
        held = None if self.stalled is None else self.stalled[1]
        self.stalled = None
        return held

    def waiting(self, now_s: float, episode: int) -> Wait:
        """Lockstep, every republish_s of wall time while the next action is not in."""
        now = self.monotonic()
        if self.stalled is None:
            waited = now - self.waiting_since
            if waited < self.lockstep_timeout_s:
                return Wait(republish=True)
            if not self.heard_driver:  # no chunk yet: a policy loading its checkpoint on a busy machine
                self.log.warn(f"no chunk yet for t={now_s:.3f} s after {waited:.1f} s: holding a tick each "
                              "lockstep_timeout_s until the policy (or the expert) answers", throttle_duration_sec=10.0)
                self.counts.lockstep_timeouts += 1
                return Wait(hold=1)
            self.stalled = (now, 0)
            self.log.warn(f"no action for t={now_s:.3f} s after {waited:.1f} s: holding the arm at {self.fps} fps "
                          f"until actions come again; episode {episode} counts as failed")
        since, held = self.stalled
        return Wait(hold=int((now - since) * self.fps) + 1 - held, stalled=True)  # the ticks due at fps

    def hold(self, wait: Wait, steppable: Callable[[], bool], step: Callable[[], None]) -> None:
        """The ticks `wait` holds, each while `steppable()` (the sim runs and no action is in yet)."""
        for _ in range(wait.hold):
            if not steppable():
                return
            if wait.stalled:
                if self.stalled is None:  # a held tick ended the episode (its step limit) and the next began
                    return
                since, held = self.stalled
                self.counts.lockstep_timeouts += 1
                self.episode_stalled += 1
                self.stalled = (since, held + 1)
            step()

    # --- episodes ----------------------------------------------------------------------------------------
    def judged(self, result: EpisodeResult) -> EpisodeResult:
        """The episode's result as reported and counted: failed, with the reasons in `interrupted`, when ticks were
        held for want of any action or the policy restarted during it."""
        reasons = []
        if self.episode_stalled:
            reasons.append(f"held {self.episode_stalled} ticks with no action (none within lockstep_timeout_s "
                           f"{self.lockstep_timeout_s:g} s: a node died or stalled)")
        if self.episode_restart == result.episode:
            reasons.append("the policy restarted during the episode (its chunks came from a new publisher)")
        if reasons:  # what the policy did not drive as one run is not its success
            result = replace(result, success=False, interrupted="; ".join(reasons))
        self.counts.episodes_done += 1
        self.counts.successes += bool(result.success)
        self.counts.clamped_ticks += result.clamped_ticks
        return result

    def fill(self, report, recent: Callable[[str, float], float], sim, clock: str) -> None:
        """Once a second: chunks, late chunks, holds, clamps, episodes, and sim seconds per wall second. `sim`: the
        act_node.stepping.SimEpisodes."""
        counts, now = self.counts, self.monotonic()
        started, tick = self._factor_window
        self._factor_window = (now, sim.tick)
        factor = (sim.tick - tick) / self.fps / max(now - started, 1e-6)
        timeouts, rejected = recent("timeouts", counts.lockstep_timeouts), recent("rejected", counts.chunks_rejected)
        stale = recent("stale", counts.holds["chunk stale"])
        if timeouts:
            report.warn(f"held {timeouts:g} ticks recently: no action within {self.lockstep_timeout_s:g} s")
        if rejected:
            report.warn(f"rejected {rejected:g} chunks recently")
        if stale:
            report.warn(f"held {stale:g} ticks recently on a stale chunk")
        if clock == "realtime" and sim.running and factor < SLOW_REALTIME:
            report.warn(f"realtime factor {factor:.2f}: the sim falls behind the wall clock")
        report.update({
            "clock": clock, "running": sim.running,
            "episode": sim.start.episode if sim.running else "none", "tick": sim.tick,
            "realtime_factor": factor, "episodes_done": counts.episodes_done, "successes": counts.successes,
            "episodes_left": "until stopped" if sim.episodes_left is None else sim.episodes_left,
            "chunks_received": counts.chunks_received, "chunks_rejected": counts.chunks_rejected,
            "late_chunks": counts.late_chunks, "late_steps": counts.late_steps,
            "earlier_episode_chunks": counts.earlier_episode_chunks,
            "held_ticks": sum(counts.holds.values()), "holds": counts.holds,
            "clamped_ticks": counts.clamped_ticks + (sim.clamped_ticks if sim.running else 0),
            "lockstep_timeouts": counts.lockstep_timeouts, "driver_restarts": self.driver_restarts,
        })
