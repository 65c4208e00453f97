"""act_node.sim_schedule without ROS: when a lockstep sim says its observation again and when it holds (before the
first chunk, one tick each timeout; after it, at fps, counted against the episode), a restarted driver, late and
stray chunks, when the first episode may start, what an interrupted episode reports, what /diagnostics says and which
run-time changes the executor takes. A fake logger and a fake wall time stand in for the node's."""

from types import SimpleNamespace

import numpy as np
import pytest

from act_node.episodes import EpisodeResult
from act_node.sim_schedule import (
    SimSchedule,
    StartGate,
    Wait,
    apply_change,
    change_problem,
    result_line,
    sim_config,
    subscribers_ready,
)

FPS = 30


class Log:
    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def __getattr__(self, level):
        return lambda line, **_: self.lines.append((level, line))

    def said(self, level: str, text: str) -> int:
        return sum(1 for lvl, line in self.lines if lvl == level and text in line)


class Wall:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def parts():
    log, wall = Log(), Wall()
    return SimSchedule(FPS, lockstep_timeout_s=10.0, log=log, monotonic=wall), log, wall


def held(schedule: SimSchedule, wait: Wait, ready_after: int | None = None) -> int:
    """How many ticks `hold` steps, the action coming in after `ready_after` of them (None: never)."""
    steps = []
    schedule.hold(wait, lambda: ready_after is None or len(steps) < ready_after, lambda: steps.append(1))
    return len(steps)


def result(episode=1, success=True) -> EpisodeResult:
    return EpisodeResult(seed=7, task="pick up the cup", success=success, steps=90, sum_reward=12.0,
                         clamped_ticks=2, episode=episode)


def test_lockstep_says_the_observation_again_until_the_timeout(parts):
    schedule, log, wall = parts
    wall.now += 9.9
    assert schedule.waiting(1.0, episode=1) == Wait(republish=True)
    assert schedule.counts.lockstep_timeouts == 0 and not log.lines


def test_before_the_first_chunk_it_holds_one_tick_each_timeout_without_failing_the_episode(parts):
    schedule, log, wall = parts
    wall.now += 10.5
    wait = schedule.waiting(1.0, episode=1)
    assert wait == Wait(hold=1) and held(schedule, wait) == 1
    assert schedule.counts.lockstep_timeouts == 1 and log.said("warn", "no chunk yet for t=1.000 s")
    schedule.stepped(held=True, reason="no step queued")  # the held tick: the wait starts again
    wall.now += 5.0
    assert schedule.waiting(1.033, episode=1).republish
    assert schedule.judged(result()).success, "a policy still loading does not fail the episode"


def test_after_the_first_chunk_a_silence_holds_at_fps_and_fails_the_episode(parts):
    schedule, log, wall = parts
    schedule.chunk_heard(1, running=True, episode=1)
    wall.now += 10.0
    first = schedule.waiting(2.0, episode=1)
    assert first == Wait(hold=1, stalled=True) and held(schedule, first) == 1
    assert log.said("warn", "no action for t=2.000 s after 10.0 s") == 1
    wall.now += 0.5  # half a second later: the ticks due at 30 fps since the stall began, less the one held
    later = schedule.waiting(2.033, episode=1)
    assert later.hold == 15 and held(schedule, later, ready_after=4) == 4, "a chunk that comes stops the holding"
    assert schedule.counts.lockstep_timeouts == 5 and log.said("warn", "no action") == 1, "said once"
    assert schedule.resumed() == 5 and schedule.resumed() is None
    judged = schedule.judged(result())
    assert not judged.success and judged.interrupted.startswith("held 5 ticks with no action")
    assert schedule.counts.episodes_done == 1 and schedule.counts.successes == 0
    schedule.episode_started()
    assert schedule.judged(result(episode=2)).success, "a new episode starts clean"


def test_a_stall_held_past_the_episodes_end_stops_holding_at_the_next_episode(parts):
    """A held tick can be the episode's last (its step limit): the next episode starts clean mid-hold, and the
    hold ends there instead of counting the new episode's ticks against it (it did: a TypeError killed the sim)."""
    schedule, log, wall = parts
    schedule.chunk_heard(1, running=True, episode=1)
    wall.now += 11.0
    held(schedule, schedule.waiting(2.0, episode=1))
    wall.now += 0.5  # half a second of ticks due
    wait = schedule.waiting(2.033, episode=1)
    assert wait.stalled and wait.hold > 3
    steps = []

    def step():
        steps.append(1)
        if len(steps) == 3:  # the step limit: the sim judges the episode and starts the next
            schedule.episode_started()

    schedule.hold(wait, lambda: True, step)
    assert len(steps) == 3 and schedule.episode_stalled == 0 and schedule.stalled is None
    assert schedule.judged(result(episode=2)).success


def test_chunks_from_a_new_publisher_are_a_restarted_driver_and_fail_that_episode_once(parts):
    schedule, log, _ = parts
    for sequence in (1, 2, 3):
        schedule.chunk_heard(sequence, running=True, episode=4)
    schedule.chunk_heard(1, running=True, episode=4)
    schedule.chunk_heard(1, running=True, episode=4)  # the new publisher's numbers start again
    assert schedule.driver_restarts == 2 and log.said("warn", "the policy restarted") == 1
    assert schedule.judged(result(episode=4)).interrupted == ("the policy restarted during the episode (its chunks "
                                                              "came from a new publisher)")
    assert schedule.counts.chunks_received == 5


def test_late_and_stray_chunks_are_counted_and_only_queued_ones_go_on(parts):
    schedule, log, _ = parts
    assert schedule.chunk_merged(0, 1.0, 1.0)
    assert schedule.chunk_merged(3, 1.0, 1.1) and log.said("debug", "3 steps past")
    assert not schedule.chunk_merged(None, 0.5, 1.1)
    schedule.chunk_rejected()
    counts = schedule.counts
    assert (counts.late_chunks, counts.late_steps, counts.earlier_episode_chunks, counts.chunks_rejected) == \
        (1, 3, 1, 1)


def test_diagnostics_warn_of_timeouts_rejections_stale_holds_and_a_slow_realtime_clock(parts):
    schedule, _, wall = parts
    schedule.stepped(True, "chunk stale")
    schedule.chunk_rejected()
    wall.now += 2.0
    sim = SimpleNamespace(tick=30, running=True, start=SimpleNamespace(episode=3), episodes_left=2, clamped_ticks=1)
    report = SimpleNamespace(values={}, warnings=[])
    report.update, report.warn = report.values.update, report.warnings.append
    schedule.fill(report, lambda key, total: total, sim, "realtime")
    assert report.values["realtime_factor"] == pytest.approx(0.5)  # 1 s of sim time in 2 s of wall time
    assert report.values["held_ticks"] == 1 and report.values["episode"] == 3
    assert report.warnings == ["rejected 1 chunks recently", "held 1 ticks recently on a stale chunk",
                               "realtime factor 0.50: the sim falls behind the wall clock"]


def test_the_first_episode_waits_for_the_awaited_subscribers_the_leader_and_the_driver():
    gate = StartGate("act_recorder, rosbag2_recorder", leader=False, await_driver=True)
    assert len(gate.waits()) == 2
    matched = lambda: [(["act_recorder", "rosbag2_recorder", "rviz"], 2)]  # noqa: E731
    assert not gate.ready(lambda: False, matched), "no driver publishes yet"
    assert gate.ready(lambda: True, matched)
    assert not gate.ready(lambda: True, lambda: [(["act_recorder", "rosbag2_recorder"], 1)]), "listed, not matched"
    assert not subscribers_ready(["act_recorder"], [(["rviz"], 1)])
    leader = StartGate("", leader=True, await_driver=True)
    assert leader.waits() == ["the leader arm on leader/joint_states"] and not leader.await_driver
    assert not leader.ready(lambda: True, list)
    leader.leader_heard = True
    assert leader.ready(lambda: False, list)
    assert StartGate("", leader=False, await_driver=False).waits() == []


def test_run_time_changes_are_checked_then_applied_to_the_executor():
    executor = SimpleNamespace(merge="replace", ensemble_coeff=0.01, max_velocity=np.ones(6), stale_after_s=1.0)
    assert change_problem("merge", "auto") == "parameter merge must be one of replace, average, ensemble, got 'auto'"
    assert change_problem("ensemble_coeff", float("nan")) == "parameter ensemble_coeff must be finite, got nan"
    assert change_problem("max_velocity", 2.0) is None
    for name, value in (("merge", "ensemble"), ("ensemble_coeff", 0.05), ("max_velocity", 2.0),
                        ("stale_after_s", 0.25)):
        assert apply_change(executor, name, value)
    assert not apply_change(executor, "episodes", 3)
    assert (executor.merge, executor.ensemble_coeff, executor.stale_after_s) == ("ensemble", 0.05, 0.25)
    assert executor.max_velocity.tolist() == [2.0] * 6


def test_the_sim_config_comes_from_its_parameters_and_refuses_a_lockstep_leader():
    values = {"command_source": "policy", "clock": "lockstep", "replan_every": 0, "objects": 2, "policy": "expert"}
    config = sim_config(values, ("clock", "replan_every", "objects"))
    assert config.objects == 2 and config.replan_every == 0 and config.clock == "lockstep"
    assert sim_config({**values, "replan_every": 5}, ("replan_every",)).replan_every == 5
    with pytest.raises(ValueError, match="command_source:=leader needs clock:=realtime"):
        sim_config({**values, "command_source": "leader"}, ("clock",))
    line = result_line(EpisodeResult(7, "pick up the cup", False, 300, 3.5, episode=2, target_error_m=0.021))
    assert line == ("episode 2 failed after 300 steps (reward 3.50, held 0 ticks, clamped 0 ticks, target 2.1 cm "
                    "off)")
