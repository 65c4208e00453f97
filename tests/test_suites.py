"""The benchmark suites (act_node.suites): fixed, versioned seed sets whose pinned episodes the simulator must
still give, and clear refusals of an unknown suite or version."""

import dataclasses

import pytest
from gymnasium.utils import seeding

from act_node import cli
from act_node.suites import SUITES, replay_pins, suite
from act_node.tabletop.scene import sample_scene


@pytest.mark.parametrize("label", [f"{name}@{version}" for name, versions in SUITES.items() for version in versions])
def test_every_suite_versions_pinned_episodes_replay(label):
    """A change to the sim, the scenes or the expert that alters one of these episodes fails here: give the suite a
    new version with new pins (act_node/suites.py)."""
    chosen = suite(label)
    assert len(chosen.pins) >= 3 and all(pin.seed in chosen.seeds for pin in chosen.pins)
    assert replay_pins(chosen) == []


def test_a_changed_episode_is_caught():
    chosen = suite("pick-4@1")
    moved = dataclasses.replace(chosen, pins=(dataclasses.replace(chosen.pins[0], steps=chosen.pins[0].steps + 1),))
    assert replay_pins(moved) == ["seed 5000: pinned 'pick up the box' succeeded in 116 steps, reward 24.588; now "
                                  "'pick up the box' succeeded in 115, 24.588"]


def test_pens_and_keys_asks_for_pens_and_keys_only():
    chosen = suite("pens-and-keys")
    requests = {sample_scene(seeding.np_random(seed)[0], chosen.objects).request for seed in chosen.seeds}
    assert requests == {"pen", "key"} and len(chosen.seeds) == 60 == len(set(chosen.seeds))


def test_the_newest_version_is_the_default_and_unknown_ones_are_refused():
    assert suite("pick-4") is SUITES["pick-4"][max(SUITES["pick-4"])]
    with pytest.raises(ValueError, match="unknown suite 'pick-5'; the suites: pick-4 .versions 1., pick-6"):
        suite("pick-5")
    with pytest.raises(ValueError, match="pick-4 has no version 9; it has versions \\[1\\]"):
        suite("pick-4@9")
    with pytest.raises(ValueError, match="suite version 'x' of pick-4 is not a number"):
        suite("pick-4@x")
    with pytest.raises(SystemExit, match="act-sim eval: --suite: unknown suite 'nope'"):
        cli.main(["eval", "--policy.path", "models/act_pick", "--suite", "nope"])
    with pytest.raises(SystemExit, match="--suite fixes the seeds"):
        cli.main(["eval", "--policy.path", "models/act_pick", "--suite", "pick-4", "--episodes", "5"])
