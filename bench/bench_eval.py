"""Evaluation throughput: `act-sim eval` (act_node.evaluate) against `lerobot-eval --env.type=act_node_pick`,
the same checkpoint and seeds, one after the other in one run (compare the ratio; machines are noisy).

Both run one episode at a time (lerobot-eval: --eval.batch_size=1; act-sim eval: --workers 1, no video),
torch on one thread (OMP_NUM_THREADS=1 for lerobot-eval), and both re-plan every n_action_steps. What
differs is what happens between re-plans: lerobot-eval renders every camera every tick and calls the
policy every tick (its action queue answers between re-plans); act-sim eval renders only at the re-plan
ticks and steps the env from its own queue.

Each tool runs twice, the first half of the seeds and then all of them: the difference is the second half's
cost once the process is up (the same seeds both ways), so the rate without the start (imports, checkpoint,
first env: about 5 s each way here, most of a 10-episode act-sim eval) is printed beside the rate with it.

Printed: episodes per minute each way and their ratio, with and without the start; per seed, success and
summed reward both ways, and how many agree (lerobot-eval reports no episode length; an identical summed
reward over up to 300 ticks says the two rollouts took the same path). A mismatch is printed, not hidden.

Run: .venv/bin/python bench/bench_eval.py --policy.path models/act_pick [--episodes 20] [--first-seed 1000]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from act_node.config import GraphConfig  # noqa: E402


def lerobot_eval(checkpoint: str, episodes: int, first_seed: int, out: Path, objects: int,
                 size: tuple[int, int]) -> tuple[float, list[dict]]:
    command = [sys.executable, "-m", "lerobot.scripts.lerobot_eval", "--env.type=act_node_pick",
               f"--policy.path={checkpoint}", f"--env.objects={objects}", f"--env.observation_height={size[0]}",
               f"--env.observation_width={size[1]}", f"--eval.n_episodes={episodes}", "--eval.batch_size=1",
               "--policy.device=cpu", f"--seed={first_seed}", f"--output_dir={out}",
               # the plugin's env cannot see the policy: give it the layout the checkpoint was trained on
               f"--env.environment_layout={GraphConfig(policy='act', checkpoint=checkpoint).environment_layout()}"]
    started = time.perf_counter()
    # one torch thread, as act-sim eval runs its policy: the same arithmetic, so the rollouts can agree bit for bit
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"lerobot-eval failed:\n{result.stderr[-3000:]}")
    info = json.loads((out / "eval_info.json").read_text())
    metrics = info["per_task"][0]["metrics"]  # one task: lists over the episodes, seeds first_seed, +1, ...
    per_episode = [{"seed": first_seed + index, "sum_reward": reward, "success": success}
                   for index, (reward, success) in enumerate(zip(metrics["sum_rewards"], metrics["successes"],
                                                                 strict=True))]
    return seconds, per_episode


def act_sim_eval(checkpoint: str, episodes: int, first_seed: int, out: Path, objects: int) -> tuple[float, dict]:
    command = [sys.executable, "-m", "act_node.cli", "eval", f"--policy.path={checkpoint}", "--episodes",
               str(episodes), "--first-seed", str(first_seed), "--objects", str(objects), "--videos", "0",
               "--workers", "1", "--out", str(out)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"act-sim eval failed:\n{result.stderr[-3000:]}")
    return seconds, json.loads((out / "report.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy.path", dest="policy_path", required=True)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--objects", type=int, default=4)
    parser.add_argument("--summary", type=Path, help="also write the rates and agreement here (JSON)")
    args = parser.parse_args()
    from act_node.checkpoints import checkpoint_cameras

    sizes = set(checkpoint_cameras(args.policy_path).values())
    if len(sizes) > 1:
        raise SystemExit(f"lerobot-eval's env takes one image size for every camera; the checkpoint has {sizes}")
    size = sizes.pop() if sizes else (96, 128)
    half = args.episodes // 2
    if half < 1:
        raise SystemExit("--episodes must be at least 2: the bench also runs the first half on its own")
    with tempfile.TemporaryDirectory() as folder:
        # each tool twice: the first half of the seeds, then all; the difference is what the second half cost
        # once the process is up (imports, checkpoint load and the first env are the same in both runs)
        ours_half_s, _ = act_sim_eval(args.policy_path, half, args.first_seed, Path(folder) / "act_sim_half",
                                      args.objects)
        ours_s, report = act_sim_eval(args.policy_path, args.episodes, args.first_seed, Path(folder) / "act_sim",
                                      args.objects)
        theirs_half_s, _ = lerobot_eval(args.policy_path, half, args.first_seed, Path(folder) / "lerobot_half",
                                        args.objects, size)
        theirs_s, per_episode = lerobot_eval(args.policy_path, args.episodes, args.first_seed,
                                             Path(folder) / "lerobot", args.objects, size)
    ours = {e["seed"]: e for e in report["per_episode"]}
    rows, same_success, same_reward = [], 0, 0
    for index, episode in enumerate(per_episode):
        seed = episode.get("seed", args.first_seed + index)
        mine = ours.get(seed)
        if mine is None:
            rows.append(f"  seed {seed}: act-sim eval has no such episode")
            continue
        same_success += bool(episode["success"]) == mine["success"]
        reward_equal = abs(float(episode["sum_reward"]) - mine["sum_reward"]) < 1e-4
        same_reward += reward_equal
        note = "" if reward_equal else "  differs"
        rows.append(f"  seed {seed}: success {bool(episode['success'])!s:5} / {mine['success']!s:5}  summed reward "
                    f"{float(episode['sum_reward']):8.3f} / {mine['sum_reward']:8.3f}{note}")
    n = len(per_episode)
    print(f"{n} episodes, seeds {args.first_seed}-{args.first_seed + n - 1}, {args.objects} objects, "
          f"{size[0]}x{size[1]}, checkpoint {args.policy_path}")
    print(f"lerobot-eval   {theirs_s:7.1f} s  {60 * n / theirs_s:6.2f} episodes/min (process start included)")
    print(f"act-sim eval   {ours_s:7.1f} s  {60 * n / ours_s:6.2f} episodes/min (process start included)")
    print(f"ratio act-sim eval / lerobot-eval: {theirs_s / ours_s:.2f}x with the process start")
    rest = args.episodes - half
    theirs_rate, ours_rate = 60 * rest / (theirs_s - theirs_half_s), 60 * rest / (ours_s - ours_half_s)
    print(f"once started ({rest} episodes: the run of {args.episodes} less the run of {half}): lerobot-eval "
          f"{theirs_rate:.1f} episodes/min, act-sim eval {ours_rate:.1f}: {ours_rate / theirs_rate:.2f}x")
    print(f"same success in {same_success}/{n}, same summed reward in {same_reward}/{n} "
          f"(lerobot-eval / act-sim eval):")
    print("\n".join(rows))
    if args.summary:
        args.summary.write_text(json.dumps({
            "episodes": n, "lerobot_eval_s": theirs_s, "act_sim_eval_s": ours_s, "with_start": theirs_s / ours_s,
            "lerobot_eval_per_min": theirs_rate, "act_sim_eval_per_min": ours_rate,
            "once_started": ours_rate / theirs_rate, "same_success": same_success, "same_reward": same_reward},
            indent=1))


if __name__ == "__main__":
    main()
