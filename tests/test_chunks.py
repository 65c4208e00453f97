"""Executing chunks: latency alignment, the three merge rules, clamps and the stale hold."""

import math

import numpy as np
import pytest

from act_node.chunks import Chunk, ChunkExecutor

FPS = 10.0


def executor(merge="replace", **kwargs) -> ChunkExecutor:
    return ChunkExecutor(FPS, lower=[-1.0, -1.0], upper=[1.0, 1.0], max_velocity=100.0, merge=merge, **kwargs)


def ramp(start: float, steps: int) -> np.ndarray:
    return np.stack([start + 0.01 * np.arange(steps)] * 2, axis=1)  # (steps, 2)


def test_steps_whose_time_has_passed_are_dropped():
    run = executor()
    dropped = run.add(Chunk(stamp_s=1.0, actions=ramp(0.0, 10)), now_s=1.3)  # 3 ticks late
    assert dropped == 3
    command = run.next_command(1.3, measured=np.zeros(2))
    assert not command.held and command.positions == pytest.approx([0.03, 0.03])


def test_replace_takes_the_new_chunk_from_its_first_step_on():
    run = executor("replace")
    run.add(Chunk(1.0, ramp(0.0, 10)), now_s=1.0)
    assert run.next_command(1.0, np.zeros(2)).positions == pytest.approx([0.0, 0.0])
    assert run.next_command(1.1, np.zeros(2)).positions == pytest.approx([0.01, 0.01])
    run.add(Chunk(1.2, ramp(0.5, 10)), now_s=1.2)
    assert run.next_command(1.2, np.zeros(2)).positions == pytest.approx([0.5, 0.5])
    assert run.queued_ticks() == list(range(13, 22))  # the new chunk's 9 remaining steps, nothing else


def test_average_weighs_the_new_chunk_by_new_weight():
    run = executor("average", new_weight=0.25)
    run.add(Chunk(1.0, np.full((5, 2), 0.4)), now_s=1.0)
    run.add(Chunk(1.0, np.full((5, 2), 0.8)), now_s=1.0)
    assert run.next_command(1.0, np.zeros(2)).positions == pytest.approx([0.5, 0.5])


def test_ensemble_weights_older_predictions_more_like_act():
    run = executor("ensemble", ensemble_coeff=0.5)
    for value in (0.2, 0.4, 0.6):
        run.add(Chunk(1.0, np.full((5, 2), value)), now_s=1.0)
    weights = np.exp(-0.5 * np.arange(3))
    expected = float(np.dot(weights, [0.2, 0.4, 0.6]) / weights.sum())
    assert run.next_command(1.0, np.zeros(2)).positions == pytest.approx([expected, expected])


def test_joint_ranges_and_velocity_bound_clamp():
    run = ChunkExecutor(FPS, lower=[-1.0, -1.0], upper=[1.0, 1.0], max_velocity=2.0)  # 0.2 per tick
    run.add(Chunk(0.0, np.array([[5.0, 0.1], [5.0, 0.1]])), now_s=0.0)
    first = run.next_command(0.0, measured=np.zeros(2))
    assert first.positions == pytest.approx([0.2, 0.1]) and first.clamped == 1
    second = run.next_command(0.1, measured=np.zeros(2))
    assert second.positions == pytest.approx([0.4, 0.1])


def test_a_stale_or_missing_chunk_holds_the_last_command():
    run = executor(stale_after_s=0.5)
    start = np.array([0.3, -0.2])
    assert run.next_command(0.0, measured=start).held  # nothing yet: hold where the arm is
    run.add(Chunk(0.0, ramp(0.0, 20)), now_s=0.0)
    assert not run.next_command(0.0, start).held
    moving = run.next_command(0.1, start)
    late = run.next_command(0.7, start)  # the newest chunk is 0.7 s old
    assert late.held and late.reason == "chunk stale"
    assert late.positions == pytest.approx(moving.positions)


def test_bad_chunks_and_settings_are_refused():
    run = executor()
    with pytest.raises(ValueError, match="chunk must be"):
        run.add(Chunk(0.0, np.zeros((0, 2))), now_s=0.0)
    with pytest.raises(ValueError, match="NaN"):
        run.add(Chunk(0.0, np.array([[math.nan, 0.0]])), now_s=0.0)
    assert run.queued_ticks() == []
    with pytest.raises(ValueError, match="merge rule"):
        executor("vote")


def test_the_same_chunk_twice_is_merged_once():
    """A policy sends a chunk again when a lockstep sim says its observation again (the first copy may have
    been lost); when both copies arrive, the ensemble must not count the prediction twice."""
    once, twice = executor("ensemble", ensemble_coeff=0.5), executor("ensemble", ensemble_coeff=0.5)
    first, second = Chunk(1.0, np.full((5, 2), 0.2)), Chunk(1.0, np.full((5, 2), 0.6))
    once.add(first, now_s=1.0)
    twice.add(first, now_s=1.0)
    assert twice.add(Chunk(1.0, np.full((5, 2), 0.2)), now_s=1.0) == 0  # the copy
    for run in (once, twice):
        run.add(second, now_s=1.0)  # another chunk for the same tick still counts
    expected = once.next_command(1.0, np.zeros(2)).positions
    assert twice.next_command(1.0, np.zeros(2)).positions == pytest.approx(expected)
    weights = np.exp(-0.5 * np.arange(2))
    assert expected == pytest.approx([np.dot(weights, [0.2, 0.6]) / weights.sum()] * 2)  # both, each once


@pytest.mark.parametrize("coeff", [0.01, 0.5, -0.1, 0.0123])
def test_ensemble_gives_lerobots_actions_for_the_same_chunks(coeff):
    """ACT's temporal ensembling written once: the executor's ensemble, asked a chunk every tick, gives LeRobot's own
    ACTTemporalEnsembler's actions for the same chunks, over more ticks than a chunk is long (every tick's mean then
    holds a chunk's worth of predictions): to the bit with LeRobot's float32 weights and chunks (what in-process
    evaluation runs), within float32's rounding with its own float64 weights (the graph's, in radians)."""
    torch = pytest.importorskip("torch")
    from lerobot.policies.act.modeling_act import ACTTemporalEnsembler

    from act_node.episodes import lerobot_weights

    chunk_size, joints, ticks = 10, 6, 27
    chunks = np.random.default_rng(0).uniform(-90.0, 90.0, (ticks, chunk_size, joints)).astype(np.float32)
    theirs = ACTTemporalEnsembler(coeff, chunk_size)
    theirs.reset()
    unbounded = dict(lower=np.full(joints, -np.inf), upper=np.full(joints, np.inf), max_velocity=np.inf,
                     merge="ensemble", ensemble_coeff=coeff, stale_after_s=np.inf)
    exact = ChunkExecutor(FPS, **unbounded, ensemble_weights=lerobot_weights(coeff, chunk_size))
    ours = ChunkExecutor(FPS, **unbounded)
    for tick, chunk in enumerate(chunks):
        expected = theirs.update(torch.from_numpy(chunk)[None])[0].numpy()
        for executor in (exact, ours):
            executor.add(Chunk(tick / FPS, chunk), now_s=tick / FPS)
        np.testing.assert_array_equal(exact.next_command(tick / FPS, np.zeros(joints)).positions, expected,
                                      err_msg=f"tick {tick}")
        command = ours.next_command(tick / FPS, np.zeros(joints))
        assert not command.held
        np.testing.assert_allclose(command.positions, expected, rtol=1e-5, atol=1e-4, err_msg=f"tick {tick}")
