"""GraphConfig: checked when made, and its launch arguments make the same config again."""

import pytest

from act_node.config import GraphConfig


def test_launch_arguments_round_trip_to_the_same_config():
    config = GraphConfig(cameras="front", max_velocity=1e9, lockstep_timeout_s=3600.0, record_video=False,
                         video_dir="/tmp/results", objects=6, clock="realtime")
    arguments = config.to_arguments()
    assert arguments["cameras"] == "front" and arguments["record_video"] == "false"
    assert GraphConfig.from_arguments(arguments) == config


def test_bad_values_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="objects must be at most 8, got 9"):
        GraphConfig(objects=9)
    with pytest.raises(ValueError, match="launch argument objects:='four' is not a int"):
        GraphConfig.from_arguments({"objects": "four"})
    with pytest.raises(ValueError, match="unknown launch arguments"):
        GraphConfig.from_arguments({"polcy": "act"})
