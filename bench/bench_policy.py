"""Recording, training and inference speed, side by side in one run (compare ratios; machines are noisy).

  recording frames/s           expert episodes written with LeRobot's writer (two cameras, 120x160)
  training steps/s             the documented ACT configuration and LeRobot's full-size ACT, each timed
                               two ways on the same batches: with data loading (LeRobotDataset with the
                               action chunk's delta timestamps, video decoding, batching, the
                               preprocessor) and compute only (forward + backward + AdamW on batches
                               loaded beforehand)
  predict_action_chunk time    through act_node.policy.ChunkPolicy against LeRobot's bare calls
                               (preprocessor, predict_action_chunk, postprocessor) on the same input,
                               interleaved; the ratio should stay within 1.05

Untrained weights: speed does not depend on what the weights learned.
Run: .venv/bin/python bench/bench_policy.py [--episodes 3] [--repeat 20]
"""

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from act_node.config import TRAIN_IMAGE_SIZE  # noqa: E402
from act_node.policy import ChunkPolicy, to_batch  # noqa: E402
from act_node.record import record  # noqa: E402
from act_node.tabletop.env import PickObjectEnv  # noqa: E402
from act_node.training import ACT_ARGUMENTS, act_config  # noqa: E402

FULL_SIZE = {"dim_model": 512, "dim_feedforward": 3200, "n_heads": 8, "n_encoder_layers": 4, "n_decoder_layers": 1}
DOCUMENTED = {key.removeprefix("policy."): int(value) for key, value in ACT_ARGUMENTS.items()
              if key.removeprefix("policy.") in FULL_SIZE}


def policy_features(dataset) -> tuple[dict, dict]:
    from lerobot.utils.feature_utils import dataset_to_policy_features

    features = dataset_to_policy_features(dataset.meta.features)
    return {k: v for k, v in features.items() if k != "action"}, {"action": features["action"]}


def make_checkpoint(dataset, sizes: dict, folder: Path) -> Path:
    """An untrained ACT checkpoint with the dataset's features and stats, saved the way lerobot-train saves."""
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    config = act_config(*policy_features(dataset), **sizes)
    policy = ACTPolicy(config)
    pre, post = make_pre_post_processors(config, dataset_stats=dataset.meta.stats)
    policy.save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    return folder


def training_rates(dataset, sizes: dict, steps: int) -> tuple[float, float]:
    """Steps/s with data loading, and compute only, over the same `steps` batches."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    config = act_config(*policy_features(dataset), **sizes)
    delta = [i / dataset.fps for i in config.action_delta_indices]
    timed = LeRobotDataset(dataset.repo_id, root=dataset.root, delta_timestamps={"action": delta},
                           video_backend="pyav")
    policy = ACTPolicy(config).train()
    pre, _ = make_pre_post_processors(config, dataset_stats=timed.meta.stats)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.optimizer_lr)

    def step(batch):
        loss, _ = policy.forward(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def loader():
        generator = torch.Generator().manual_seed(0)  # the same batches both times
        return torch.utils.data.DataLoader(timed, batch_size=int(ACT_ARGUMENTS["batch_size"]), shuffle=True,
                                           generator=generator)

    batches = iter(loader())
    step(pre(next(batches)))  # warm-up
    started = time.perf_counter()
    prepared = []
    for _, batch in zip(range(steps), batches):
        prepared.append(pre(batch))
        step(prepared[-1])
    with_loading = steps / (time.perf_counter() - started)
    started = time.perf_counter()
    for batch in prepared:
        step(batch)
    return with_loading, steps / (time.perf_counter() - started)


def chunk_times(folder: Path, observation: dict, task: str, repeat: int) -> tuple[float, float]:
    """Median seconds: ChunkPolicy.__call__ and LeRobot's bare calls, interleaved on the same input."""
    wrapped = ChunkPolicy.load(folder)
    policy, pre, post = wrapped.policy, wrapped.preprocessor, wrapped.postprocessor
    batch = to_batch(observation, task)

    def bare():
        with torch.no_grad():
            return post(policy.predict_action_chunk(pre(dict(batch))))

    wrapped(observation, task)
    bare()
    ours, theirs = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        wrapped(observation, task)
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        bare()
        theirs.append(time.perf_counter() - started)
    return statistics.median(ours), statistics.median(theirs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--train-steps", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    torch.set_num_threads(os.cpu_count() or 1)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "data"
        env = PickObjectEnv(objects=4, image_size=TRAIN_IMAGE_SIZE)
        summary = record(env, "local/bench", root, episodes=args.episodes)
        height, width = TRAIN_IMAGE_SIZE
        print(f"recording: {summary.frames / summary.seconds:.1f} frames/s "
              f"({summary.frames} frames, {summary.seconds:.1f} s, 2 cameras {height}x{width})")
        dataset = LeRobotDataset("local/bench", root=root, video_backend="pyav")
        for name, sizes in (("documented", DOCUMENTED), ("full-size", FULL_SIZE)):
            loading, compute = training_rates(dataset, sizes, args.train_steps)
            print(f"training {name:10s} ACT: {loading:.2f} steps/s with data loading, {compute:.2f} compute only "
                  f"(loading costs {1 / loading - 1 / compute:.2f} s a step; batch {ACT_ARGUMENTS['batch_size']}, "
                  f"CPU, {torch.get_num_threads()} threads)")
        observation, _ = env.reset(seed=3)
        for name, sizes in (("documented", DOCUMENTED), ("full-size", FULL_SIZE)):
            folder = make_checkpoint(dataset, sizes, Path(scratch) / name)
            ours, theirs = chunk_times(folder, observation, env.task, args.repeat)
            print(f"predict_action_chunk {name:10s}: policy.py {ours * 1000:.1f} ms, "
                  f"LeRobot bare {theirs * 1000:.1f} ms, ratio {ours / theirs:.3f}")
        env.close()


if __name__ == "__main__":
    main()
