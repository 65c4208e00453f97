"""The reference pages' facts, pinned: the worked example and quiz of 004, the networks of 000."""

import math

import pytest
import torch

from act_node.attention import networks as attention
from act_node.attention.networks import ITEMS, KINDS, Lookup, Plain, Transformer, make_scenes
from act_node.attention.selector import Selector


def test_worked_example_weights_and_output():
    # 004: q = (1, 2); keys oncoming car (2, 1), pedestrian (1, 2), parked car (-1, 0); d = 2
    query = torch.tensor([[1.0, 2.0]])
    keys = torch.tensor([[2.0, 1.0], [1.0, 2.0], [-1.0, 0.0]])
    values = torch.tensor([[0.6], [0.9], [0.1]])
    output, weights, scores = attention.attention(query, keys, values)
    assert scores[0].tolist() == pytest.approx([4 / math.sqrt(2), 5 / math.sqrt(2), -1 / math.sqrt(2)])
    assert [round(w, 2) for w in weights[0].tolist()] == [0.33, 0.66, 0.01]
    assert weights.sum().item() == pytest.approx(1.0)
    assert round(output.item(), 2) == 0.79


def test_quiz_answers():
    # Q1: q = (1, 0), keys (2, 0), (0, 3); the quiz takes the softmax of the bare dot products -> 0.88 / 0.12.
    # attention() divides by sqrt(d): a query scaled by sqrt(2) undoes that.
    keys = torch.tensor([[2.0, 0.0], [0.0, 3.0]])
    _, weights, scores = attention.attention(torch.tensor([[1.0, 0.0]]) * math.sqrt(2), keys, torch.eye(2))
    assert scores[0].tolist() == pytest.approx([2.0, 0.0])
    assert [round(w, 2) for w in weights[0].tolist()] == [0.88, 0.12]
    # Q2: weights (0.7, 0.2, 0.1) over values (10, 20, 30) -> 14; scores log(w) give exactly those weights
    keys = torch.log(torch.tensor([[0.7], [0.2], [0.1]]))
    output, weights, _ = attention.attention(torch.tensor([[1.0]]), keys, torch.tensor([[10.0], [20.0], [30.0]]))
    assert weights[0].tolist() == pytest.approx([0.7, 0.2, 0.1])
    assert output.item() == pytest.approx(14.0)


def test_parameter_counts():
    assert attention.parameter_count(Lookup()) == 1442
    # Plain: 8 slots x 11 + 8 request inputs -> hidden -> hidden -> 2
    assert attention.parameter_count(Plain(16)) == 96 * 16 + 16 + 16 * 16 + 16 + 16 * 2 + 2
    layer = attention.parameter_count(Transformer(layers=1)) - attention.parameter_count(Transformer(layers=0))
    # one layer: in_proj 3x32x32+96, out_proj 32x32+32, feed-forward 32->64->32, two layer norms
    assert layer == (3 * 32 * 32 + 96) + (32 * 32 + 32) + (32 * 64 + 64) + (64 * 32 + 32) + 2 * 64


def test_scenes_are_well_formed():
    scenes = make_scenes(500, 6, torch.Generator().manual_seed(0))
    assert scenes.tokens.shape == (500, 6, 10)
    kinds = scenes.tokens[..., :KINDS].argmax(dim=2)
    assert all(len(set(row.tolist())) == 6 for row in kinds), "kinds in a scene must be distinct"
    assert (scenes.tokens[..., KINDS:] >= 0).all() and (scenes.tokens[..., KINDS:] <= 1).all()
    rows = torch.arange(500)
    assert torch.equal(scenes.request.argmax(dim=1), kinds[rows, scenes.asked])
    assert torch.equal(scenes.answers["find"], scenes.tokens[rows, scenes.asked, KINDS:])
    # "nearest" is another object, and none is closer to the requested one
    target = scenes.answers["find"][:, None]
    distance = (scenes.tokens[..., KINDS:] - target).norm(dim=2)
    distance[rows, scenes.asked] = math.inf
    assert torch.allclose((scenes.answers["nearest"] - scenes.answers["find"]).norm(dim=1), distance.min(dim=1).values)


def test_same_seed_same_scenes_and_unknown_sizes_rejected():
    a = make_scenes(10, 4, torch.Generator().manual_seed(3))
    b = make_scenes(10, 4, torch.Generator().manual_seed(3))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.request, b.request)
    with pytest.raises(ValueError, match="objects must be 1..8"):
        make_scenes(1, 9, torch.Generator())
    with pytest.raises(ValueError, match="unknown network 'mlp'"):
        attention.build("mlp")


def test_by_hand_attention_equals_the_trained_module():
    lookup = Selector.load().network
    scenes = make_scenes(64, 6, torch.Generator().manual_seed(11))
    with torch.no_grad():
        module_answer, module_weights = lookup.answer(scenes.tokens, scenes.request)
        hand_answer, hand_weights, _ = lookup.by_hand(scenes.tokens, scenes.request)
    assert torch.allclose(hand_answer, module_answer, atol=1e-6)
    assert torch.allclose(hand_weights, module_weights, atol=1e-6)


@pytest.mark.parametrize("objects", [4, 6])
def test_object_order_does_not_change_the_answer(objects):
    lookup = Selector.load().network
    scenes = make_scenes(256, objects, torch.Generator().manual_seed(12))
    order = torch.randperm(objects, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        difference = (lookup(scenes.tokens[:, order], scenes.request) - lookup(scenes.tokens, scenes.request)).abs()
    print(f"largest difference with {objects} objects reordered: {difference.max().item():.2e} m")
    assert difference.max().item() < 1e-6


def test_transformer_request_attention_is_a_distribution_per_layer():
    transformer = Transformer(layers=2).eval()
    scenes = make_scenes(8, 5, torch.Generator().manual_seed(2))
    with torch.no_grad():
        per_layer = transformer.request_attention(scenes.tokens, scenes.request)
        # the layer-by-layer pass reproduces the encoder's own output
        x = transformer.sequence(scenes.tokens, scenes.request)
        for layer in transformer.encoder.layers:
            x = layer(x)
        assert torch.allclose(transformer.out(x[:, 0]), transformer(scenes.tokens, scenes.request), atol=1e-6)
    assert len(per_layer) == 2
    for weights in per_layer:
        assert weights.shape == (8, 6)
        assert torch.allclose(weights.sum(dim=1), torch.ones(8), atol=1e-5)


def test_plain_rejects_more_objects_than_slots():
    with pytest.raises(ValueError, match="8 object slots"):
        Plain(16)(torch.zeros(1, 9, 10), torch.zeros(1, 8))


def test_training_is_deterministic_and_learns():
    # a short run: two networks from the same seed are identical, and better than untrained
    first = attention.train("lookup", "find", seed=4, lr=0.01, epochs=3, scenes=2000)
    second = attention.train("lookup", "find", seed=4, lr=0.01, epochs=3, scenes=2000)
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
    torch.manual_seed(4)
    untrained = Lookup().eval()
    assert attention.miss_cm(first, "find", 4, count=500) < 0.5 * attention.miss_cm(untrained, "find", 4, count=500)


def test_items_are_the_pages_eight_kinds():
    assert ITEMS == ("cube", "ball", "cup", "pen", "box", "can", "key", "toy")
