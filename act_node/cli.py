"""`act-sim`: the table-top from the command line.

  act-sim video    one expert episode for a seed, every camera side by side, as mp4 or gif
  act-sim expert   the scripted expert's success rate over seeded scenes (parallel over the cores)
"""

from __future__ import annotations

import argparse
import json
import math
import os
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from tqdm import tqdm

from act_node.tabletop.env import FPS, PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert
from act_node.tabletop.video import caption, write_video


def make_env(args: argparse.Namespace, **overrides) -> PickObjectEnv:
    settings = dict(objects=args.objects, cameras=tuple(args.cameras.split(",")),
                    image_size=(args.height, args.width), target_source=args.target)
    settings.update(overrides)
    return PickObjectEnv(**settings)


def run_expert_episode(env: PickObjectEnv, seed: int, frames: list | None = None) -> dict:
    """One seeded episode under the scripted expert; appends captioned frames if a list is given."""
    expert = ScriptedExpert(env)
    observation, info = env.reset(seed=seed)
    expert.reset(observation)
    total = 0.0
    if frames is not None:
        frames.append(caption(env.render(), f"seed {seed}: {env.task}  step 0"))
    terminated = truncated = False
    while not (terminated or truncated):
        observation, reward, terminated, truncated, info = env.step(expert.act(observation))
        total += reward
        if frames is not None:
            frames.append(caption(env.render(), f"seed {seed}: {env.task}  step {info['steps']}  "
                                                f"reward {reward:.2f}{'  success' if info['is_success'] else ''}"))
    return {"seed": seed, "task": env.task, "success": info["is_success"], "steps": info["steps"],
            "return": total, "target_error_m": info["target_error_m"], "clipped_total": info["clipped_total"]}


def cmd_video(args: argparse.Namespace) -> None:
    env = make_env(args)
    frames: list[np.ndarray] = []
    result = run_expert_episode(env, args.seed, frames)
    # hold the last frame a second so the outcome can be seen
    path = write_video(frames + [frames[-1]] * FPS, Path(args.out), FPS)
    env.close()
    print(json.dumps(result))
    print(f"wrote {path} ({len(frames)} frames)")


def _expert_worker(job: tuple[dict, list[int]]) -> list[dict]:
    settings, seeds = job
    env = PickObjectEnv(**settings)
    try:
        return [run_expert_episode(env, seed) for seed in seeds]
    finally:
        env.close()


def cmd_expert(args: argparse.Namespace) -> None:
    settings = dict(objects=args.objects, cameras=tuple(args.cameras.split(",")),
                    image_size=(args.height, args.width), target_source=args.target)
    seeds = list(range(args.first_seed, args.first_seed + args.episodes))
    workers = args.workers or os.cpu_count() or 1
    jobs = [(settings, [seed]) for seed in seeds]
    with Pool(workers) as pool:
        results = list(tqdm(pool.imap(_expert_worker, jobs), total=len(jobs), desc="expert episodes", unit="ep"))
    episodes = [episode for batch in results for episode in batch]
    successes = sum(e["success"] for e in episodes)
    by_kind: dict[str, list[bool]] = {}
    for e in episodes:
        by_kind.setdefault(e["task"].removeprefix("pick up the "), []).append(e["success"])
    differ = [e for e in episodes if e["target_error_m"] > 0.01]
    report = {
        "objects": args.objects, "episodes": len(episodes), "success_rate": successes / len(episodes),
        "by_kind": {kind: f"{sum(v)}/{len(v)}" for kind, v in sorted(by_kind.items())},
        "mean_steps": float(np.mean([e["steps"] for e in episodes])),
        "target_source": args.target,
        "selector_off_by_more_than_1cm": len(differ),
        "selector_max_error_m": max((e["target_error_m"] for e in episodes), default=0.0),
        "failed_seeds": [e["seed"] for e in episodes if not e["success"]],
    }
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"report": report, "episodes": episodes}, indent=1) + "\n")
    if not math.isfinite(report["selector_max_error_m"]):
        print("the selector judged the requested kind absent in some episodes (target_error_m = inf)")


def add_env_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--objects", type=int, default=4, help="objects on the table, 1-8")
    parser.add_argument("--cameras", default="front,wrist", help="comma-separated: front, top, wrist")
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--target", choices=("selector", "truth"), default="selector",
                        help="where environment_state's target comes from")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="act-sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    video = commands.add_parser("video", help="an expert episode as a video")
    add_env_arguments(video)
    video.add_argument("--seed", type=int, default=0)
    video.add_argument("--out", default="outputs/expert_seed0.mp4", help=".mp4 or .gif")
    video.set_defaults(run=cmd_video)
    expert = commands.add_parser("expert", help="the scripted expert's success rate")
    add_env_arguments(expert)
    expert.add_argument("--episodes", type=int, default=100)
    expert.add_argument("--first-seed", type=int, default=0)
    expert.add_argument("--workers", type=int, default=None)
    expert.add_argument("--out", default=None, help="write the report and every episode as JSON")
    expert.set_defaults(run=cmd_expert)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
