"""Evaluate a LeRobot checkpoint in the table-top: seeded episodes, the sim waiting for the policy.

Rollout semantics follow lerobot-eval: the policy is reset at each episode, observations go through the
checkpoint's preprocessor, the action chunk through its postprocessor, and the first `n_action_steps`
actions of each chunk are queued and executed before the policy is asked again. The env steps only when
an action is there, so results do not depend on how fast the machine is.
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from tqdm import tqdm

from act_node.policy import ChunkPolicy, FeatureSpec
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.video import caption, step_caption, write_video


@dataclass
class EvalSettings:
    policy_path: str
    episodes: int = 10
    first_seed: int = 1000  # away from the seeds demonstrations are recorded with (0 on)
    objects: int = 4
    cameras: tuple[str, ...] = ("front", "wrist")
    image_size: tuple[int, int] = (240, 320)
    target_source: str = "selector"
    max_steps: int = 300
    n_action_steps: int | None = None  # default: the checkpoint's own
    device: str = "cpu"
    videos: int = 2  # the first K episodes
    out: str = "outputs/eval"


def wilson_interval(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95% confidence interval of a success rate (Wilson score: sound at 0% and 100% and for few episodes)."""
    if total == 0:
        return 0.0, 1.0
    rate = successes / total
    centre = (rate + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(rate * (1 - rate) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def make_env(settings: EvalSettings) -> PickObjectEnv:
    return PickObjectEnv(objects=settings.objects, cameras=settings.cameras, image_size=settings.image_size,
                         target_source=settings.target_source, max_steps=settings.max_steps)


def load_policy(settings: EvalSettings) -> ChunkPolicy:
    spec = FeatureSpec(cameras={name: settings.image_size for name in settings.cameras})
    return ChunkPolicy.load(settings.policy_path, device=settings.device, expect=spec)


def run_episode(env: PickObjectEnv, policy: ChunkPolicy, seed: int, n_action_steps: int,
                frames: list | None = None) -> dict:
    """One seeded episode; returns its record (and appends captioned frames if given a list)."""
    policy.reset()
    observation, info = env.reset(seed=seed)
    queue: deque[np.ndarray] = deque()
    total, inference_s, calls = 0.0, 0.0, 0
    terminated = truncated = False
    if frames is not None:
        frames.append(caption(env.render(), step_caption(seed, env.task)))
    while not (terminated or truncated):
        if not queue:
            chunk, seconds = policy(observation, env.task)
            queue.extend(chunk[:n_action_steps])
            inference_s, calls = inference_s + seconds, calls + 1
        observation, reward, terminated, truncated, info = env.step(queue.popleft())
        total += reward
        if frames is not None:
            frames.append(caption(env.render(), step_caption(seed, env.task, info, reward)))
    return {"seed": seed, "task": env.task, "success": bool(info["is_success"]), "steps": info["steps"],
            "sum_reward": total, "clipped_total": info["clipped_total"],
            "policy_calls": calls, "mean_inference_s": inference_s / max(calls, 1)}


_WORKER: tuple[PickObjectEnv, ChunkPolicy, int] | None = None  # a worker process's env, policy and n_action_steps


def _start_worker(settings: EvalSettings, steps: int) -> None:
    """Pool initializer: each worker builds its env and loads the policy once, for all its episodes."""
    import torch

    global _WORKER
    torch.set_num_threads(1)  # one core per worker
    _WORKER = (make_env(settings), load_policy(settings), steps)


def _worker_episode(seed: int) -> dict:
    env, policy, steps = _WORKER
    return run_episode(env, policy, seed, steps)


def evaluate(settings: EvalSettings, workers: int = 1) -> dict:
    """Run the episodes, write report.json and the first videos under settings.out, return the report."""
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(settings.first_seed, settings.first_seed + settings.episodes))
    policy = load_policy(settings)  # fails here, clearly, on a mismatched checkpoint
    steps = settings.n_action_steps or policy.config.n_action_steps
    if not 1 <= steps <= policy.chunk_size:
        raise ValueError(f"n_action_steps must be 1..{policy.chunk_size} (the chunk size), got {steps}")
    episodes: list[dict] = []
    filmed, rest = seeds[: settings.videos], seeds[settings.videos:]
    env = make_env(settings)
    progress = tqdm(total=len(seeds), desc="evaluating", unit="episode")
    try:
        for seed in filmed:  # filmed in this process, in order
            frames: list[np.ndarray] = []
            episodes.append(run_episode(env, policy, seed, steps, frames))
            write_video(frames + [frames[-1]] * env.fps, out / f"episode_seed{seed}.mp4", env.fps)
            progress.update(1)
        if rest and workers > 1:
            with get_context("spawn").Pool(min(workers, len(rest)), _start_worker, (settings, steps)) as pool:
                for episode in pool.imap(_worker_episode, rest):
                    episodes.append(episode)
                    progress.update(1)
        else:
            for seed in rest:
                episodes.append(run_episode(env, policy, seed, steps))
                progress.update(1)
    finally:
        env.close()
    progress.close()
    report = {
        "policy": str(settings.policy_path),
        **summarize(episodes),
        "mean_inference_s": float(np.mean([e["mean_inference_s"] for e in episodes])),
        "n_action_steps": steps,
        "settings": {**asdict(settings), "workers": workers},
        "videos": [str(out / f"episode_seed{seed}.mp4") for seed in filmed],
        "per_episode": sorted(episodes, key=lambda e: e["seed"]),
    }
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def summarize(episodes: list[dict]) -> dict:
    """Episode count, success rate with its 95% interval, mean summed reward and mean length."""
    successes = sum(e["success"] for e in episodes)
    return {"episodes": len(episodes), "success_rate": successes / len(episodes),
            "success_ci95": list(wilson_interval(successes, len(episodes))),
            "mean_sum_reward": float(np.mean([e["sum_reward"] for e in episodes])),
            "mean_episode_length": float(np.mean([e["steps"] for e in episodes]))}
