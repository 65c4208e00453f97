"""act_node.policy_schedule without ROS: which observation the policy node answers (due ticks), which it refuses
and why (stale, ahead, silent, once per stamp and logged once per onset), and what a time that goes back resets.
A fake logger, a fake clock and a fake wall time stand in for the node's."""

import math

import numpy as np
import pytest

from act_node.policy_schedule import PolicySchedule, stamp_matcher

FPS = 30.0
JOINTS = np.zeros(6)
FRAME = np.zeros((4, 4, 3), np.uint8)


class Log:
    """The node's logger as the schedule uses it: (level, line) pairs."""

    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def info(self, line, **_):
        self.lines.append(("info", line))

    def warn(self, line, **_):
        self.lines.append(("warn", line))

    def error(self, line, **_):
        self.lines.append(("error", line))

    def said(self, level: str, text: str) -> int:
        return sum(1 for lvl, line in self.lines if lvl == level and text in line)


class Times:
    """The node's clock (ROS time active or not, now) and the wall time, both set by hand."""

    def __init__(self):
        self.active, self.now, self.wall = False, 0.0, 100.0

    def clock(self):
        return self.active, self.now

    def monotonic(self):
        return self.wall


def schedule(cameras=(), infer="every_n", replan_every=10, wants_target=False, stale_s=1.0, ahead_s=1.0,
             jump_back_s=1.0, wants_scene=False):
    log, times = Log(), Times()
    matcher = stamp_matcher(list(cameras), list(cameras), [0.0], FPS, 0.01, 0.0)
    made = PolicySchedule(matcher, list(cameras), FPS, replan_every, infer, stale_s, ahead_s, jump_back_s,
                          wants_target, log, times.clock, times.monotonic, wants_scene=wants_scene)
    return made, log, times


def tick(k: int, start: float = 0.0) -> float:
    return start + k / FPS


def test_every_n_answers_one_observation_in_each_block_of_replan_every_ticks():
    s, _, _ = schedule(replan_every=10)
    assert s.take_due() is None  # no run yet
    s.begin(0.0, "pick up the cup")
    s.add_joints(tick(3), JOINTS)  # before the run's first answer, any tick is due
    due = s.take_due()
    assert due.stamp == pytest.approx(tick(3)) and due.reset and due.task == "pick up the cup" and due.serial == 1
    assert s.tick(due.stamp) == 3 and s.slot(due.stamp) == 0
    for k in range(4, 10):  # the rest of block 0: not due
        s.add_joints(tick(k), JOINTS)
        assert s.take_due() is None
    assert not s.due(tick(9)) and s.due(tick(10))
    s.add_joints(tick(11), JOINTS)  # block 1's first tick missing (an arm's late joint state): its next one
    due = s.take_due()
    assert s.tick(due.stamp) == 11 and not due.reset
    assert s.take_due() is None  # answered once
    assert s.stats.skipped == 0


def test_a_newer_due_observation_passes_the_older_ones_over_and_counts_them_skipped():
    s, _, _ = schedule(replan_every=10)
    s.begin(0.0, "")
    s.add_joints(tick(0), JOINTS)
    assert s.take_due().stamp == 0.0
    for k in (10, 20, 30):  # three blocks' first ticks came while the policy thought
        s.add_joints(tick(k), JOINTS)
    assert s.tick(s.take_due().stamp) == 30
    assert s.stats.skipped == 2  # blocks 1 and 2


def test_latest_answers_every_newer_stamp():
    s, _, _ = schedule(infer="latest", replan_every=10)
    s.begin(0.0, "")
    for k in range(3):
        s.add_joints(tick(k), JOINTS)
        assert s.tick(s.take_due().stamp) == k


def test_an_observation_behind_the_newest_joint_states_is_refused_as_stale_once():
    s, log, _ = schedule(cameras=["front"], stale_s=1.0)
    s.begin(0.0, "")
    s.add_image("front", 0.0, FRAME)
    s.add_joints(0.0, JOINTS)  # complete
    s.add_joints(1.5, JOINTS)  # no front frame for it: the only complete observation is 1.5 s old
    assert s.take_due() is None
    assert s.stats.refused == {"front stale": 1}
    assert "1.500 s behind the joint states" in s.stats.last_refusal
    assert s.take_due() is None  # refused once, never answered
    assert sum(s.stats.refused.values()) == 1
    assert log.said("warn", "no chunk: the observation at t=0.000 s is 1.500 s behind") == 1


def test_an_observation_behind_or_ahead_of_the_clock_is_refused():
    s, _, times = schedule(stale_s=1.0, ahead_s=1.0)
    times.active, times.now = True, 10.0
    s.begin(0.0, "")
    s.add_joints(8.5, JOINTS)
    assert s.stale(8.5) == ("observation stale", "the observation at t=8.500 s is 1.500 s behind the clock")
    assert s.stale(9.5) is None
    assert s.stale(11.5)[0] == "observation ahead"
    assert s.take_due() is None and s.stats.refused == {"observation stale": 1}
    times.active = False  # stamps on another time (a sim without use_sim_time): nothing to compare
    assert s.stale(8.5) is None


def test_a_message_ahead_of_the_clock_is_refused_and_counted_each_time():
    s, log, times = schedule(ahead_s=1.0)
    assert not s.ahead_of_clock("joint_states", 50.0)  # no clock: nothing is ahead of it
    times.active, times.now = True, 10.0
    assert not s.ahead_of_clock("joint_states", 10.9)
    assert s.ahead_of_clock("joint_states", 11.5) and s.ahead_of_clock("joint_states", 11.6)
    assert s.stats.refused == {"joint_states ahead": 2}  # messages: each counted
    assert log.said("warn", "joint_states stamped 1.500 s ahead of the clock") == 1  # said once per onset


def test_refusals_count_once_per_stamp_and_say_once_per_onset_until_an_answer():
    s, log, times = schedule(cameras=["front"], stale_s=1.0, replan_every=1)  # every tick due
    s.begin(0.0, "")
    s.add_joints(0.0, JOINTS)  # due, but front has no frame for it
    assert s.take_due() is None and s.stats.refused == {}  # it has not waited stale_s yet
    times.wall += 1.5
    for _ in range(3):
        assert s.take_due() is None
    assert s.stats.refused == {"front stale": 1}  # one stamp, one refusal
    assert "camera front silent for 1.5 s (no frame the joint states of t=0.000 s)" == s.stats.last_refusal
    s.add_joints(tick(1), JOINTS)
    assert s.take_due() is None
    assert s.stats.refused == {"front stale": 2}
    assert log.said("warn", "refused: front stale") == 1  # logged once per onset
    s.add_image("front", tick(2), FRAME)
    s.add_joints(tick(2), JOINTS)
    assert s.take_due().stamp == tick(2)
    assert log.said("info", "answering again from t=0.067 s (after: front stale)") == 1
    assert s.stats.skipped == 0  # the two refused are not counted again as skipped


def test_a_frame_stamped_ahead_of_its_joint_states_is_refused_at_once_and_forgotten():
    s, _, _ = schedule(cameras=["front"], ahead_s=1.0)
    s.begin(0.0, "")
    s.add_image("front", 5.0, FRAME)
    s.add_joints(0.0, JOINTS)
    assert s.take_due() is None
    assert s.stats.refused == {"front ahead": 1}
    assert s.matcher.newest_stamp("front") is None


def test_joint_states_stamped_back_restart_the_run_from_the_new_time():
    s, log, _ = schedule(jump_back_s=1.0)
    s.begin(10.0, "pick up the cup")
    s.add_joints(10.0, JOINTS)
    assert s.take_due().reset
    s.sent(10.0, b"chunk")
    s.add_joints(10.5, JOINTS)
    s.add_joints(10.2, JOINTS)  # back 0.3 s: no jump
    assert s.stats.clock_jumps == 0 and s.episode_start_s == 10.0
    s.add_joints(2.0, JOINTS)  # back 8.5 s: a bag played in a loop
    assert s.stats.clock_jumps == 1
    assert s.episode_start_s == 2.0 and s.answer is None
    assert s.answered_s == pytest.approx(2.0 - 1 / FPS)
    assert [stamp for stamp, _ in s.matcher.buffers["joints"]] == [2.0]  # the old time forgotten
    assert log.said("warn", "the joint states' stamps went back 8.500 s (to t=2.000 s)") == 1
    due = s.take_due()
    assert due.stamp == 2.0 and due.reset and due.run == 2.0  # answered from the new time, the policy reset


def test_the_clock_going_back_restarts_the_run_unless_the_joint_states_showed_it_first():
    s, log, times = schedule(jump_back_s=1.0)
    s.begin(10.0, "")
    s.add_joints(10.0, JOINTS)
    s.take_due()
    times.now = 10.5
    assert not s.clock_jumped(2.0)  # the joint states are not ahead of the new time: nothing to reset
    times.now = 3.0
    assert s.clock_jumped(7.0)
    assert s.stats.clock_jumps == 1 and s.episode_start_s == 3.0
    assert s.answered_s == pytest.approx(3.0 - 1 / FPS) and s.matcher.newest_stamp("joints") is None
    assert log.said("warn", "the clock went back 7.000 s (to t=3.000 s)") == 1
    assert not s.clock_jumped(7.0)  # the newest joint state forgotten: the next one starts the new time


def test_a_jump_back_without_a_run_forgets_the_answered_stamp():
    s, _, _ = schedule()
    s.add_joints(10.0, JOINTS)
    s.add_joints(2.0, JOINTS)
    assert s.stats.clock_jumps == 1 and s.episode_start_s is None and s.answered_s == -math.inf


def test_an_observation_said_again_gets_its_chunk_again():
    s, _, _ = schedule()
    s.begin(0.0, "")
    s.add_joints(0.0, JOINTS)
    s.sent(s.take_due().stamp, b"chunk")
    assert s.add_joints(0.0, JOINTS) == b"chunk" and s.stats.chunks_resent == 1
    assert s.add_joints(tick(1), JOINTS) is None


def test_a_chunk_for_a_run_that_ended_is_dropped():
    s, log, _ = schedule()
    s.begin(0.0, "")
    s.add_joints(0.0, JOINTS)
    due = s.take_due()
    assert s.inferred(due.stamp, 0.02, due.run)
    s.end()
    assert not s.inferred(due.stamp, 0.04, due.run)
    assert (s.stats.inferences, s.stats.chunks_dropped) == (2, 1)
    assert s.stats.inference_max_s == 0.04 and log.said("info", "its run is over") == 1


def test_it_waits_for_this_episodes_target():
    s, log, _ = schedule(wants_target=True)
    s.begin(5.0, "pick up the cup")
    s.set_target((4.0, np.zeros(2)))  # the last episode's
    s.add_joints(5.0, JOINTS)
    assert s.take_due() is None and log.said("warn", "waiting for target/point for this episode") == 1
    s.set_target((5.0, np.ones(2)))
    due = s.take_due()
    assert due.target[0] == 5.0 and due.scene is None


def test_a_grasp_planning_checkpoint_waits_for_this_episodes_scene_too():
    s, log, _ = schedule(wants_target=True, wants_scene=True)
    s.begin(5.0, "pick up the cup")
    s.set_target((5.0, np.ones(2)))
    s.set_scene((4.0, [("cup", 0.5, 0.3, 0.0)]))  # the last episode's
    s.add_joints(5.0, JOINTS)
    assert s.take_due() is None and log.said("warn", "waiting for scene/objects for this episode") == 1
    report = Report()
    s.fill(report, lambda key, total: total)
    assert any("waiting for scene/objects" in w for w in report.warnings)
    s.set_scene((5.0, [("cup", 0.52, 0.3, 0.0)]))
    due = s.take_due()
    assert due.scene == (5.0, [("cup", 0.52, 0.3, 0.0)]) and due.target[0] == 5.0


class Report:
    def __init__(self):
        self.values, self.warnings, self.errors = {}, [], []

    def add(self, key, value):
        self.values[key] = value

    def update(self, values):
        self.values.update(values)

    def warn(self, message):
        self.warnings.append(message)

    def error(self, message):
        self.errors.append(message)


def test_the_diagnostics_say_what_was_refused_and_what_is_silent():
    s, _, times = schedule(cameras=["front"], stale_s=1.0)
    s.begin(0.0, "pick up the cup")
    s.add_joints(5.0, JOINTS)
    s.add_joints(1.0, JOINTS)  # a jump back: the run goes on from t=1
    s.take_due()
    times.wall += 1.5
    s.take_due()  # front silent while the observation of t=1 waits for it: refused
    s.failed(RuntimeError("boom"))
    report, grown = Report(), {}
    s.fill(report, lambda key, total: grown.setdefault(key, total))
    values = report.values
    assert values["observations_refused"] == 1 and values["refused"] == {"front stale": 1}
    assert values["time_jumps_back"] == 1 and values["inference_failures"] == 1
    assert values["run"] == "from t=1.000 s" and values["task"] == "pick up the cup" and values["infer"] == "every_n"
    assert values["stale_inputs"] == "joint_states, camera/front" and values["camera/front.silent_s"] == "never heard"
    assert values["joint_states.silent_s"] == "1.50"
    assert report.errors == ["inference failed: RuntimeError('boom')"]
    assert "the time jumped back: the run's state was reset" in report.warnings
    assert any(w.startswith("refused 1 observations recently") for w in report.warnings)
    assert grown == {"failures": 1, "refused": 1, "jumps": 1, "unmatched": grown["unmatched"]}
