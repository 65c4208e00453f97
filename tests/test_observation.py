"""ObservationMatcher: observations matched across sources by stamp, within the skew bound, in any order."""

import numpy as np
import pytest

from act_node.observation import ObservationMatcher


def matcher(skew_s=0.01):
    return ObservationMatcher(["joints", "front", "wrist"], skew_s)


def test_the_newest_stamp_every_source_has_wins():
    m = matcher()
    for stamp in (1.0, 1.1, 1.2):
        for source in ("joints", "front", "wrist"):
            m.add(source, stamp, f"{source}@{stamp}")
    stamp, parts = m.newest()
    assert stamp == 1.2
    assert parts == {"joints": "joints@1.2", "front": "front@1.2", "wrist": "wrist@1.2"}


def test_a_partial_observation_is_skipped_for_an_older_complete_one():
    m = matcher()
    for source in ("joints", "front", "wrist"):
        m.add(source, 1.0, source)
    m.add("joints", 1.1, "late joints")
    m.add("front", 1.1, "late front")  # the wrist image of 1.1 has not come (or was lost)
    assert m.newest()[0] == 1.0
    m.add("wrist", 1.1, "late wrist")
    assert m.newest() == (1.1, {"joints": "late joints", "front": "late front", "wrist": "late wrist"})


def test_stamps_within_the_skew_match_and_beyond_it_do_not():
    m = matcher(skew_s=0.01)
    m.add("joints", 2.0, "j")
    m.add("front", 2.008, "f")
    m.add("wrist", 1.995, "w")
    assert m.newest() == (2.0, {"joints": "j", "front": "f", "wrist": "w"})
    far = matcher(skew_s=0.01)
    far.add("joints", 2.0, "j")
    far.add("front", 2.02, "f")
    far.add("wrist", 2.0, "w")
    assert far.newest() is None


def test_out_of_order_arrival_matches_by_stamp_not_by_arrival():
    m = matcher()
    m.add("front", 3.0, "front 3")
    m.add("front", 2.0, "front 2")
    m.add("wrist", 2.0, "wrist 2")
    m.add("joints", 3.0, "joints 3")
    m.add("joints", 2.0, "joints 2")
    m.add("wrist", 3.0, "wrist 3")
    assert m.newest() == (3.0, {"joints": "joints 3", "front": "front 3", "wrist": "wrist 3"})
    assert m.newest(after_s=3.0) is None
    # `accept` picks which stamps may be answered (the policy node's re-plan ticks)
    assert m.newest(accept=lambda stamp: stamp < 2.5) == (2.0, {"joints": "joints 2", "front": "front 2",
                                                                  "wrist": "wrist 2"})


def test_within_the_skew_the_newest_frame_is_taken_not_the_nearest():
    m = matcher(skew_s=0.05)
    m.add("joints", 5.0, "j")
    for stamp in (4.96, 4.99, 5.04):
        m.add("front", stamp, stamp)
        m.add("wrist", stamp, stamp)
    assert m.newest()[1] == {"joints": "j", "front": 5.04, "wrist": 5.04}


# --- cameras on their own clocks: each joint state takes each camera's newest frame, not from its future
# (beyond skew_s) nor older than frame_max_age of the camera's periods -------------------------------------
def free_running(max_age=3.0, skew_s=0.005, front_fps=30, wrist_fps=30):
    return ObservationMatcher(["joints", "front", "wrist"], skew_s, max_age=max_age,
                              periods={"front": 1 / front_fps, "wrist": 1 / wrist_fps})


def stream(m, camera, fps, first_s, last_s):
    """Frames of `camera` at `fps` from `first_s` on (a phase of its own), up to `last_s`: the newest stamp."""
    stamps = np.arange(first_s, last_s, 1 / fps)
    for stamp in stamps:
        m.add(camera, float(stamp), f"{camera}@{stamp:.4f}")
    return float(stamps[-1])


def test_a_frame_from_the_joint_states_future_is_refused_and_the_one_before_taken():
    m = free_running()
    stream(m, "wrist", 30, 0.0, 1.0)
    m.add("front", 0.987, "before")
    m.add("front", 1.012, "after")  # captured 12 ms after the joints were read: not theirs
    m.add("joints", 1.0, "j")
    assert m.newest()[1]["front"] == "before"
    alone = free_running()
    stream(alone, "wrist", 30, 0.0, 1.0)
    alone.add("front", 1.012, "after")
    alone.add("joints", 1.0, "j")
    assert alone.newest() is None
    assert alone.misses(1.0) == {"front": pytest.approx(0.012)}, "its nearest frame: 12 ms after"


def test_a_frame_older_than_its_cameras_bound_is_refused():
    m = free_running(max_age=3.0)
    stream(m, "wrist", 30, 0.0, 1.0)
    newest = stream(m, "front", 30, 0.01, 0.8)  # then the front camera stops
    m.add("joints", 1.0, "j")
    assert m.measured_period_s("front") == pytest.approx(1 / 30)
    assert m.oldest_s("front") == pytest.approx(0.005 + 3 / 30)
    assert m.newest() is None
    assert m.misses(1.0) == {"front": pytest.approx(newest - 1.0)}
    m.add("joints", newest + 0.09, "j2")  # 90 ms after its newest frame: within 3 periods of 33 ms
    assert m.newest()[1]["front"] == f"front@{newest:.4f}"


def test_the_bound_follows_each_cameras_own_period():
    m = free_running(max_age=3.0, wrist_fps=15)
    wrist = stream(m, "wrist", 15, 0.003, 1.0)  # 15 fps: its newest frame may be twice as old as a 30 fps one's
    front = stream(m, "front", 30, 0.021, wrist - 0.04)
    tick = wrist + 0.15  # 150 ms after both newest frames: within 3 x 67 ms, not within 3 x 33 ms
    m.add("joints", tick, "j")
    assert tick - front > 0.15
    assert m.newest() is None and set(m.misses(tick)) == {"front"}
    m.add("front", tick - 0.02, "fresh front")
    assert m.newest() == (tick, {"joints": "j", "front": "fresh front", "wrist": f"wrist@{wrist:.4f}"})


def test_the_newest_frame_is_taken_at_any_phase_of_free_running_cameras():
    """Joints at 30 Hz and cameras at 30, 25 and 15 fps, each at a phase of its own: every tick (once each camera
    has shown a frame) takes the camera's newest frame up to skew_s after it, never one from its future."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        rates = {"front": 30, "wrist": 25, "top": 15}
        m = ObservationMatcher(["joints", *rates], 0.005, buffer=1000, max_age=3.0,
                               periods={camera: 1 / fps for camera, fps in rates.items()})
        frames = {c: np.arange(rng.uniform(0, 1 / fps), 3.0, 1 / fps) for c, fps in rates.items()}
        for camera, stamps in frames.items():
            for stamp in stamps:
                m.add(camera, float(stamp), float(stamp))
        for tick in np.arange(rng.uniform(0.2, 0.3), 2.9, 1 / 30):
            m.add("joints", float(tick), float(tick))
            stamp, parts = m.newest()
            assert stamp == tick
            for camera, stamps in frames.items():
                assert parts[camera] == stamps[stamps <= tick + 0.005].max()


def test_lockstep_stamps_match_exactly_and_an_older_frame_never_stands_in():
    """frame_max_age 0, as the sim graph runs it: the frame of the tick's own stamp, never the tick before's."""
    m = matcher()
    assert m.bounds.max_age == 0.0
    for k in range(5):
        for source in ("joints", "front", "wrist"):
            m.add(source, k / 30, f"{source}@{k}")
    m.add("joints", 5 / 30, "joints@5")
    m.add("wrist", 5 / 30, "wrist@5")  # the front frame of tick 5 is not here (yet)
    assert m.newest()[0] == pytest.approx(4 / 30), "tick 5 waits for its own front frame"
    assert m.newest(after_s=4.5 / 30) is None
    m.add("front", 5 / 30, "front@5")
    assert m.newest() == (5 / 30, {"joints": "joints@5", "front": "front@5", "wrist": "wrist@5"})


def test_clear_forgets_and_bad_sources_are_named():
    m = matcher()
    for source in ("joints", "front", "wrist"):
        m.add(source, 1.0, source)
    m.clear()
    assert m.newest() is None
    with pytest.raises(KeyError, match="unknown source 'top'"):
        m.add("top", 1.0, None)
    with pytest.raises(ValueError, match="skew_s must be >= 0"):
        ObservationMatcher(["joints"], -1.0)


def test_environment_state_is_the_target_then_the_request_one_hot():
    from act_node.observation import environment_state, environment_state_names, requested_kind
    from act_node.table_frame import KIND_NAMES as ITEMS

    state = environment_state((0.4, 0.3), "pen")
    assert state.dtype == np.float32 and state.shape == (2 + len(ITEMS),) == (len(environment_state_names()),)
    assert state[:2].tolist() == pytest.approx([0.4, 0.3])
    assert state[2:].sum() == 1.0 and environment_state_names()[2 + int(np.argmax(state[2:]))] == "request_pen"
    assert requested_kind("pick up the pen") == "pen" and requested_kind("fetch me a coffee") == ""
    with pytest.raises(ValueError, match="unknown requested kind ''"):
        environment_state((0.4, 0.3), requested_kind("fetch me a coffee"))
    with pytest.raises(ValueError, match="two finite numbers"):
        environment_state((0.4, float("nan")), "pen")
    with pytest.raises(ValueError, match="two finite numbers"):
        environment_state((0.4, 0.3, 0.0), "pen")


def test_a_camera_rate_is_given_for_each_camera_and_checked():
    from act_node.observation import periods_of_rates

    assert periods_of_rates(["front", "wrist"], [], 30.0) == {"front": 1 / 30, "wrist": 1 / 30}
    assert periods_of_rates(["front", "wrist"], [30.0, 15.0], 30.0) == {"front": 1 / 30, "wrist": 1 / 15}
    with pytest.raises(ValueError, match=r"camera_fps must give one rate > 0 .* per camera of \['front', 'wrist'\]"):
        periods_of_rates(["front", "wrist"], [30.0], 30.0)
    with pytest.raises(ValueError, match="camera_fps must give one rate > 0"):
        periods_of_rates(["front", "wrist"], [30.0, 0.0], 30.0)


def test_a_full_buffer_lets_go_of_the_first_message_that_came_not_of_the_oldest_stamp():
    """After a jump back (a bag played again) the new time's stamps are the oldest: they must stay."""
    m = ObservationMatcher(["joints", "front"], 0.01, buffer=5)
    for k in range(5):
        m.add("front", 100.0 + k / 30, k)
    m.add("front", 40.0, "the new time")
    kept = sorted(stamp for stamp, _ in m.buffers["front"])
    assert kept == pytest.approx([40.0, *(100 + k / 30 for k in (1, 2, 3, 4))])
    m.add("joints", 40.0, "j")
    assert m.newest() == (40.0, {"joints": "j", "front": "the new time"})


def test_each_joint_state_is_counted_once_no_later_frame_can_change_its_match():
    """ages: a tick is counted when every camera has shown a frame after it (its frame may still be on its way
    before that), or, for a camera that shows none, once the joint states moved count_after_s past it."""
    m = ObservationMatcher(["joints", "front"], 0.005, max_age=3.0, count_after_s=0.49)
    m.add("front", 0.98, "before")
    m.add("joints", 1.0, "j")
    assert m.ages.cameras == {}, "a newer front frame up to 1.005 may still come"
    m.add("front", 1.02, "after")
    assert (m.ages.cameras["front"].matched, m.ages.cameras["front"].last_s) == (1, pytest.approx(0.02))
    for k in range(1, 40):  # the front camera falls silent; the joint states go on to 2.3 s
        m.add("joints", 1.0 + k / 30, "j")
    age = m.ages.cameras["front"]
    # counted: the ticks up to 1.8 s (0.49 s before the newest); 1.02's frame serves 1.033, 1.067 and 1.1 (within
    # its 3 periods and skew_s: 0.105 s), the 21 after found none
    assert (age.matched, age.unmatched) == (1 + 3, 21)
