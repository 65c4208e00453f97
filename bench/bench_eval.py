"""Evaluation throughput: `act-sim eval` against `lerobot-eval --env.type=act_node_pick`, the same checkpoint and
seeds, one after the other in one run, and their ratio (compare ratios, not times: the machine is shared).

lerobot-eval runs at its own defaults: `--eval.batch_size` unset (LeRobot picks 70% of the cores, at most the
episode count: 1 env on 2 cores; --lerobot-batch N sets it, async vector envs as LeRobot defaults above 1) and torch
with its own thread count. It renders every camera every tick and asks the policy every tick. act-sim eval runs
--batch episodes side by side in each of --workers processes (act_node.lockstep: one batched policy call a tick,
cameras rendered only when the policy reads images; one torch thread a process), no video.

Each tool runs twice, the first half of the seeds and then all of them: the difference is the second half's cost
once the process is up, so the rate without the start (imports, checkpoint, envs) is printed beside the rate with
it. Per seed: success and summed reward both ways, and how many agree (lerobot-eval reports no episode length nor
why it ended; an equal summed reward over up to 300 ticks says the two took the same path). With --one-at-a-time,
the same seeds also run here one episode at a time (act_node.evaluate.evaluate_episode: a lone policy call a tick,
as before batching) and each episode's success, mode and length are compared with act-sim eval's. A mismatch is
printed, not hidden.

Run: .venv/bin/python bench/bench_eval.py --policy.path models/act_target_tool_yaw [--episodes 20]
     [--first-seed 1000] [--batch 16] [--workers 2] [--lerobot-batch N] [--one-at-a-time] [--summary F.json]
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

ROOT = Path(__file__).resolve().parents[1]
# this checkout's act_node and LeRobot plugin for both tools' processes (the venv's editable installs may point
# at another checkout)
PYTHONPATH = os.pathsep.join([str(ROOT), str(ROOT / "plugins" / "lerobot_env_act_node"),
                              *filter(None, [os.environ.get("PYTHONPATH")])])


def lerobot_default_batch(episodes: int) -> int:
    from lerobot.configs.default import EvalConfig

    return EvalConfig(n_episodes=episodes).batch_size


def lerobot_eval(checkpoint: str, episodes: int, first_seed: int, out: Path, objects: int,
                 size: tuple[int, int], batch: int | None) -> tuple[float, list[dict]]:
    command = [sys.executable, "-m", "lerobot.scripts.lerobot_eval", "--env.type=act_node_pick",
               f"--policy.path={checkpoint}", f"--env.objects={objects}", f"--env.observation_height={size[0]}",
               f"--env.observation_width={size[1]}", f"--eval.n_episodes={episodes}", "--policy.device=cpu",
               f"--seed={first_seed}", f"--output_dir={out}",
               # the plugin's env cannot see the policy: give it the layout the checkpoint was trained on
               f"--env.environment_layout={GraphConfig(policy='act', checkpoint=checkpoint).environment_layout()}",
               *([f"--eval.batch_size={batch}"] if batch else [])]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": PYTHONPATH})
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"lerobot-eval failed:\n{result.stderr[-3000:]}")
    info = json.loads((out / "eval_info.json").read_text())
    metrics = info["per_task"][0]["metrics"]  # one task: lists over the episodes, seeds first_seed, +1, ...
    per_episode = [{"seed": first_seed + index, "sum_reward": reward, "success": success}
                   for index, (reward, success) in enumerate(zip(metrics["sum_rewards"], metrics["successes"],
                                                                 strict=True))]
    return seconds, per_episode


def act_sim_eval(checkpoint: str, episodes: int, first_seed: int, out: Path, objects: int, batch: int,
                 workers: int) -> tuple[float, dict]:
    command = [sys.executable, "-m", "act_node.cli", "eval", f"--policy.path={checkpoint}", "--episodes",
               str(episodes), "--first-seed", str(first_seed), "--objects", str(objects), "--videos", "0",
               "--batch", str(batch), "--workers", str(workers), "--out", str(out)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": PYTHONPATH})
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"act-sim eval failed:\n{result.stderr[-3000:]}")
    return seconds, json.loads((out / "report.json").read_text())


def one_at_a_time(checkpoint: str, seeds: list[int], objects: int) -> tuple[float, dict[int, dict]]:
    """The seeds' episodes here, one after another, a lone policy call a tick (evaluate_episode)."""
    import torch

    from act_node.evaluate import evaluate_episode, execution, load_policy, make_env

    torch.set_num_threads(1)
    config = GraphConfig(policy="act", checkpoint=checkpoint, objects=objects)
    steps, merge, coeff = execution(config)
    env, policy = make_env(config), load_policy(config)
    started = time.perf_counter()
    episodes = {seed: evaluate_episode(env, policy, seed, steps, ensemble_coeff=coeff, merge=merge).to_dict()
                for seed in seeds}
    seconds = time.perf_counter() - started
    env.close()
    return seconds, episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy.path", dest="policy_path", required=True)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--objects", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16, help="act-sim eval --batch")
    parser.add_argument("--workers", type=int, default=2, help="act-sim eval --workers")
    parser.add_argument("--lerobot-batch", type=int, default=None, help="lerobot-eval --eval.batch_size (default: "
                        "unset, LeRobot's own choice)")
    parser.add_argument("--one-at-a-time", action="store_true", help="also run the seeds one episode at a time "
                        "here and compare success, mode and length with act-sim eval's")
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
    theirs_batch = args.lerobot_batch or lerobot_default_batch(args.episodes)
    with tempfile.TemporaryDirectory() as folder:
        # each tool twice: the first half of the seeds, then all; the difference is what the second half cost
        # once the process is up (imports, checkpoint load and the first env are the same in both runs)
        ours_half_s, _ = act_sim_eval(args.policy_path, half, args.first_seed, Path(folder) / "act_sim_half",
                                      args.objects, args.batch, args.workers)
        ours_s, report = act_sim_eval(args.policy_path, args.episodes, args.first_seed, Path(folder) / "act_sim",
                                      args.objects, args.batch, args.workers)
        theirs_half_s, _ = lerobot_eval(args.policy_path, half, args.first_seed, Path(folder) / "lerobot_half",
                                        args.objects, size, args.lerobot_batch)
        theirs_s, per_episode = lerobot_eval(args.policy_path, args.episodes, args.first_seed,
                                             Path(folder) / "lerobot", args.objects, size, args.lerobot_batch)
    ours = {e["seed"]: e for e in report["per_episode"]}
    rows, same_success, same_reward = [], 0, 0
    for index, episode in enumerate(per_episode):
        seed = episode.get("seed", args.first_seed + index)
        mine = ours.get(seed)
        if mine is None:
            rows.append(f"  seed {seed}: act-sim eval has no such episode")
            continue
        same_success += bool(episode["success"]) == mine["success"]
        reward_equal = abs(float(episode["sum_reward"]) - mine["sum_reward"]) < 1e-3
        same_reward += reward_equal
        note = "" if reward_equal else "  differs"
        rows.append(f"  seed {seed}: success {bool(episode['success'])!s:5} / {mine['success']!s:5}  summed reward "
                    f"{float(episode['sum_reward']):8.3f} / {mine['sum_reward']:8.3f}  {mine['outcome']}, "
                    f"{mine['steps']} steps{note}")
    n = len(per_episode)
    print(f"{n} episodes, seeds {args.first_seed}-{args.first_seed + n - 1}, {args.objects} objects, "
          f"{size[0]}x{size[1]}, checkpoint {args.policy_path}; {os.cpu_count()} cores")
    print(f"lerobot-eval   {theirs_s:7.1f} s  {60 * n / theirs_s:6.2f} episodes/min (process start included), "
          f"--eval.batch_size {theirs_batch}{'' if args.lerobot_batch else ' (its default here)'}")
    print(f"act-sim eval   {ours_s:7.1f} s  {60 * n / ours_s:6.2f} episodes/min (process start included), "
          f"--batch {args.batch} --workers {args.workers}")
    print(f"ratio act-sim eval / lerobot-eval: {theirs_s / ours_s:.2f}x with the process start")
    rest = args.episodes - half
    theirs_rate, ours_rate = 60 * rest / (theirs_s - theirs_half_s), 60 * rest / (ours_s - ours_half_s)
    print(f"once started ({rest} episodes: the run of {args.episodes} less the run of {half}): lerobot-eval "
          f"{theirs_rate:.1f} episodes/min, act-sim eval {ours_rate:.1f}: {ours_rate / theirs_rate:.2f}x")
    print(f"same success in {same_success}/{n}, same summed reward (to 1e-3) in {same_reward}/{n} "
          f"(lerobot-eval / act-sim eval):")
    print("\n".join(rows))
    summary = {"episodes": n, "lerobot_eval_batch": theirs_batch, "batch": args.batch, "workers": args.workers,
               "lerobot_eval_s": theirs_s, "act_sim_eval_s": ours_s, "with_start": theirs_s / ours_s,
               "lerobot_eval_per_min": theirs_rate, "act_sim_eval_per_min": ours_rate,
               "once_started": ours_rate / theirs_rate, "same_success": same_success, "same_reward": same_reward}
    if args.one_at_a_time:
        lone_s, lone = one_at_a_time(args.policy_path, sorted(ours), args.objects)
        differ = [seed for seed, mine in ours.items()
                  if (mine["success"], mine["outcome"], mine["steps"]) !=
                  (lone[seed]["success"], lone[seed]["outcome"], lone[seed]["steps"])]
        print(f"one at a time here: {lone_s:.1f} s for {len(lone)} episodes ({60 * len(lone) / lone_s:.2f} "
              f"episodes/min once started); success, mode and length the same as act-sim eval's in "
              f"{len(lone) - len(differ)}/{len(lone)}" + (f"; differ: seeds {differ}" if differ else ""))
        for seed in differ:
            print(f"  seed {seed}: one at a time {lone[seed]['outcome']} {lone[seed]['steps']} steps, act-sim eval "
                  f"{ours[seed]['outcome']} {ours[seed]['steps']} steps")
        summary |= {"one_at_a_time_s": lone_s, "one_at_a_time_same": len(lone) - len(differ),
                    "one_at_a_time_differ": differ}
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
