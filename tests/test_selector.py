"""The shipped selector: accuracy on unseen scenes, absence, and clear errors on bad input."""

import numpy as np
import pytest
import torch

from act_node.attention import networks as attention
from act_node.attention.networks import KINDS, make_scenes
from act_node.attention.selector import Selector, absence_rates, score_ranges


@pytest.fixture(scope="module")
def selector():
    return Selector.load()


def test_shipped_selector_misses_under_one_cm_on_unseen_six_object_scenes(selector):
    miss = attention.miss_cm(selector.network, "find", 6, seed=424242)
    print(f"selector miss on 2,000 unseen 6-object scenes: {miss:.3f} cm")
    assert miss < 1.0


def test_select_answers_target_weights_and_found(selector):
    choice = selector.select([("pen", 0.8, 0.1), ("cup", 0.3, 0.6), ("ball", 0.5, 0.9)], "cup")
    assert choice.found
    assert np.hypot(choice.target_xy[0] - 0.3, choice.target_xy[1] - 0.6) < 0.02
    assert choice.weights.shape == (3,)
    assert choice.weights.sum() == pytest.approx(1.0, abs=1e-5)
    assert int(np.argmax(choice.weights)) == 1


def test_select_on_a_scene_of_any_size(selector):
    for objects in range(1, KINDS + 1):
        scene = make_scenes(1, objects, torch.Generator().manual_seed(objects))
        kind = attention.ITEMS[int(scene.request[0].argmax())]
        choice = selector.select(scene.tokens[0], kind)
        assert choice.found and choice.weights.shape == (objects,)
        assert np.hypot(*(np.array(choice.target_xy) - scene.answers["find"][0].numpy())) < 0.03


def test_absent_kind_is_reported_not_guessed(selector):
    choice = selector.select([("pen", 0.8, 0.1), ("ball", 0.5, 0.9)], "cup")
    assert not choice.found and choice.target_xy is None
    assert choice.score < choice.threshold
    empty = selector.select([], "cup")
    assert not empty.found and empty.weights.shape == (0,)


def test_thresholds_separate_present_from_absent_over_the_whole_table(selector):
    low, high = score_ranges(selector.network)
    for r in range(KINDS):
        others = torch.cat([high[r, :r], high[r, r + 1:]]).max()
        assert others < selector.thresholds[r] < low[r, r]


def test_false_found_and_false_absent_rates(selector):
    rates = absence_rates(selector, scenes_per_count=300)
    print(rates)
    assert max(rates["false_found"].values()) == 0.0
    assert max(rates["false_absent"].values()) == 0.0


@pytest.mark.parametrize("objects, kind, message", [
    ([("mug", 0.1, 0.1)], "cup", "unknown object kind 'mug'"),
    ([("cup", 0.1, 0.1)], "plate", "unknown object kind 'plate'"),
    ([("cup", 1.5, 0.1)], "cup", r"off the table"),
    ([("cup", float("nan"), 0.1)], "cup", "NaN or inf"),
    ([("cup", 0.1)], "cup", r"expected \(kind, x, y\)"),
    ([("cup", 0.1, 0.1), ("cup", 0.5, 0.5)], "cup", "2 objects of kind 'cup'"),
])
def test_bad_input_gets_a_clear_error(selector, objects, kind, message):
    with pytest.raises(ValueError, match=message):
        selector.select(objects, kind)


def test_malformed_tokens_get_a_clear_error(selector):
    with pytest.raises(ValueError, match=r"shape \(objects, 10\)"):
        selector.select(np.zeros((3, 9)), "cup")
    bad = np.zeros((2, 10))
    bad[0, 2] = bad[0, 3] = 1.0
    bad[1, 2] = 1.0
    with pytest.raises(ValueError, match="token 0: kind part must be one-hot"):
        selector.select(bad, "cup")


def test_missing_or_wrong_model_folder(tmp_path, selector):
    with pytest.raises(FileNotFoundError, match="selector file missing"):
        Selector.load(tmp_path)
    selector.save(tmp_path)
    again = Selector.load(tmp_path)
    assert torch.equal(again.thresholds, selector.thresholds)
    config = tmp_path / "selector.json"
    config.write_text(config.read_text().replace('"width": 16', '"width": 8'))
    with pytest.raises(ValueError, match="does not hold a Lookup of width 8"):
        Selector.load(tmp_path)
