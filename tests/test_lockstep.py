"""act_node.lockstep: episodes side by side with one batched policy call a tick end as they do one at a time."""

import pytest
from conftest import TINY_IMAGE

from act_node.evaluate import evaluate_episode
from act_node.lockstep import lockstep
from act_node.policy import ChunkPolicy
from act_node.tabletop.env import PickObjectEnv

SEEDS = [1000, 1001, 1002, 1003, 1004]


def envs(count: int, max_steps: int = 30) -> list[PickObjectEnv]:
    return [PickObjectEnv(objects=2, image_size=TINY_IMAGE, max_steps=max_steps) for _ in range(count)]


def judged(result) -> tuple:
    """What an episode's outcome is: whether, how and when it ended, on which task, after how many chunks."""
    return result.seed, result.task, result.success, result.outcome, result.steps, result.policy_calls


def closed(many: list[PickObjectEnv]) -> None:
    for env in many:
        env.close()


@pytest.mark.parametrize("steps, coeff", [(10, None), (1, 0.01)], ids=["chunks of 10", "temporal ensembling"])
def test_episodes_side_by_side_end_as_they_do_one_at_a_time(tiny_checkpoint, steps, coeff):
    policy = ChunkPolicy.load(tiny_checkpoint)
    alone = envs(1)
    one_at_a_time = [evaluate_episode(alone[0], policy, seed, steps, ensemble_coeff=coeff) for seed in SEEDS]
    side_by_side = envs(3)
    batched = sorted((result for result, _ in lockstep(side_by_side, policy, SEEDS, steps, coeff)),
                     key=lambda result: result.seed)
    closed(alone + side_by_side)
    assert [judged(r) for r in batched] == [judged(r) for r in one_at_a_time]
    # a batch's float arithmetic may differ from a lone call's in the last bits; the contact physics carries such a
    # difference on over the episode (1.1% of a return on CI's CPU), so the return agrees closely, not exactly
    assert [r.sum_reward for r in batched] == pytest.approx([r.sum_reward for r in one_at_a_time], rel=0.05)
    if coeff is not None:  # ensembling asks every tick
        assert all(r.policy_calls == r.steps for r in batched)


def test_an_episode_is_the_same_bit_for_bit_whatever_rides_beside_it(tiny_checkpoint):
    """Calls are padded to MIN_ROWS rows: the seed's episode alone and among four others is the same, to the bit."""
    policy = ChunkPolicy.load(tiny_checkpoint)
    single, many = envs(1), envs(4)
    alone = [result for seed in SEEDS[:2] for result, _ in lockstep(single, policy, [seed], 1, 0.01)]
    among = {result.seed: result for result, _ in lockstep(many, policy, SEEDS, 1, 0.01)}
    closed(single + many)
    for result in alone:
        assert result.to_dict() | {"mean_inference_s": 0} == among[result.seed].to_dict() | {"mean_inference_s": 0}


def test_the_cameras_render_only_for_a_policy_that_reads_them_or_a_filmed_episode(tiny_state_checkpoint,
                                                                                  tiny_checkpoint):
    renders: list[int] = []

    def counted(env: PickObjectEnv) -> PickObjectEnv:
        render = env.table.rig.render
        env.table.rig.render = lambda *a, **k: renders.append(env.steps) or render(*a, **k)
        return env

    state_only = ChunkPolicy.load(tiny_state_checkpoint)
    assert state_only.camera_names == []
    # ensembled (a chunk every tick) in slots of 12 and 15 ticks: the third seed starts beside a running episode
    slots = [counted(env) for env in envs(1, max_steps=12) + envs(1, max_steps=15)]
    results = {result.seed: (result, frames) for result, frames in lockstep(slots, state_only, SEEDS[:3], 1, 0.01,
                                                                            film=[SEEDS[0]])}
    filmed, frames = results[SEEDS[0]]  # beside unfilmed episodes, its images are not the policy's
    # the resets render (the env's reset observation), the unfilmed ticks none, the filmed episode every tick
    assert len(renders) == 3 + filmed.steps and results[SEEDS[1]][1] is None
    assert len(frames) == filmed.steps + 1 and frames[0].shape[1] == 2 * TINY_IMAGE[1]  # front and wrist
    assert [results[seed][0].steps for seed in SEEDS[:3]] == [12, 15, 12]
    renders.clear()
    list(lockstep(slots, state_only, SEEDS[:2], 10))  # chunks of 10: asked at ticks 0 and 10
    assert renders == [0, 0]
    renders.clear()
    reads_images = ChunkPolicy.load(tiny_checkpoint)  # front and wrist: rendered at its re-plans (every 10 ticks)
    list(lockstep(slots, reads_images, SEEDS[:2], 10))
    closed(slots)
    assert sorted(renders) == [0, 0, 10, 10]


@pytest.mark.parametrize("use_async", [False, True], ids=["SyncVectorEnv", "AsyncVectorEnv"])
def test_lerobot_eval_vector_envs_through_the_plugin_equal_act_sim_eval_seed_by_seed(tiny_checkpoint, tmp_path,
                                                                                      use_async):
    """lerobot-eval --eval.batch_size 2 over 4 episodes (two batches: seeds 1000-1001, then 1002-1003) against
    act-sim eval on seeds 1000-1003: the same success, summed and best reward for each seed."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from act_node.config import GraphConfig
    from act_node.evaluate import evaluate

    root = Path(__file__).resolve().parents[1]
    here = os.pathsep.join([str(root), str(root / "plugins" / "lerobot_env_act_node")])  # this checkout's plugin
    out = tmp_path / "lerobot_eval"
    result = subprocess.run(
        [sys.executable, "-m", "lerobot.scripts.lerobot_eval", "--env.type=act_node_pick",
         f"--policy.path={tiny_checkpoint}", "--env.observation_height=48", "--env.observation_width=64",
         "--env.objects=2", "--env.episode_length=25", "--env.scene=sim", "--eval.n_episodes=4",
         "--eval.batch_size=2",
         f"--eval.use_async_envs={str(use_async).lower()}", "--policy.device=cpu", "--seed=1000",
         f"--output_dir={out}"], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": here, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "eval_info.json").read_text())["per_task"][0]["metrics"]
    config = GraphConfig(policy="act", checkpoint=str(tiny_checkpoint), episodes=4, first_seed=1000, objects=2,
                         image_height=TINY_IMAGE[0], image_width=TINY_IMAGE[1], max_steps=25, scene="sim")
    ours = evaluate(config, out=tmp_path / "act_sim", videos=0)["per_episode"]
    assert [e["seed"] for e in ours] == [1000, 1001, 1002, 1003]
    assert metrics["successes"] == [e["success"] for e in ours]
    assert metrics["sum_rewards"] == pytest.approx([e["sum_reward"] for e in ours], abs=1e-3)
    assert metrics["max_rewards"] == pytest.approx([e["max_reward"] for e in ours], abs=1e-4)


def test_from_min_rows_on_a_row_of_the_shipped_size_is_the_same_whatever_rides_beside_it():
    """The padding's premise, with an ACT of the shipped size (models/act_target_tool, one torch thread, as act-sim
    eval runs it): from MIN_ROWS rows up to 64, row 0's chunk is the same to the bit. At 4 rows it was not (4-5
    rows and 6 or more were two classes here), and --workers 2 changed episodes against --workers 1."""
    import torch
    from lerobot.policies.act.modeling_act import ACTPolicy

    from act_node.lockstep import MIN_ROWS

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = ACTPolicy.from_pretrained("models/act_target_tool").eval().model
        width = model.config.input_features["observation.environment_state"].shape[0]
        generator = torch.Generator().manual_seed(0)
        state, env = torch.randn(64, 6, generator=generator), torch.randn(64, width, generator=generator)
        with torch.no_grad():
            rows = {m: model({"observation.state": state[:m], "observation.environment_state": env[:m]})[0][0]
                    for m in (MIN_ROWS, MIN_ROWS + 1, 12, 16, 33, 64)}
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(row, rows[MIN_ROWS]) for row in rows.values()), \
        {m: float((row - rows[MIN_ROWS]).abs().max()) for m, row in rows.items()}

