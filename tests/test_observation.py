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


def test_the_nearest_stamp_of_each_other_source_is_taken():
    m = matcher(skew_s=0.05)
    m.add("joints", 5.0, "j")
    for stamp in (4.96, 4.99, 5.04):
        m.add("front", stamp, stamp)
        m.add("wrist", stamp, stamp)
    assert m.newest()[1] == {"joints": "j", "front": 4.99, "wrist": 4.99}


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
