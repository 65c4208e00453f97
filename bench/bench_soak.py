"""Soak: hundreds of episodes of the shipped policy through the ROS 2 graph, then the same seeds in-process.

Lockstep (the default): `act-sim launch` runs the graph (sim, selector, policy node: every node its own process,
the package's Fast DDS profile) for `--episodes` seeded episodes, with the in-process evaluation's settings (no
velocity bound, one torch thread) and the sim's default `lockstep_timeout_s`, so a stall would show as held ticks
instead of a wait. This process watches it from outside: each node's resident memory (/proc) when `--memory-at`
episodes have finished and at the end, and every node's /diagnostics, down to the last report each node sends
as it stops. Then `act_node.evaluate` runs the same seeds in-process (`--workers`) and every episode is compared:
success and length exactly, the summed reward within 1% (see COMPARED).

    python bench/bench_soak.py [--episodes 300] [--first-seed 3000] [--memory-at 50] [--out outputs/soak]

Realtime with a CPU hog (`--realtime`): the graph in realtime for `--seconds` with `--hogs` busy processes beside
it, and the sim's realtime factor, late chunks and holds as its diagnostics count them, against a run of the same
length with no hog, side by side.

    python bench/bench_soak.py --realtime [--seconds 120] [--hogs 2]

Writes soak.json (or realtime.json) under --out and prints the figures. About an hour for 300 episodes here.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 50))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

COMPARED = ("success", "steps")  # exactly; the summed reward within REWARD_RTOL
REWARD_RTOL = 0.01
# The graph's target is the selector node's answer from the scene markers; in-process the selector answers from
# the env's own objects: the two points differ by well under a micrometre (seen: 1.7e-7 m), and the policy takes
# the point as input, so the summed reward differs in its later digits. Clamped ticks and policy calls are
# counted only by the sim node and by in-process evaluation respectively: not compared.


def node_processes(root: int) -> dict[str, int]:
    """The node processes under `root` (act-sim launch): the module each runs (act_node.nodes.X) -> pid."""
    found, stack = {}, [root]
    while stack:
        pid = stack.pop()
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                stack += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-m" in command:
            module = command[command.index(b"-m") + 1].decode()
            if module.startswith("act_node.nodes."):
                found[module.rsplit(".", 1)[1]] = pid
    return found


def resident_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Monitor:
    """rqt's monitor, in this process: the newest /diagnostics status of every node (by its name)."""

    def __init__(self):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor

        from act_node.nodes.messages import RELIABLE

        rclpy.init()
        self.node = rclpy.create_node("soak_monitor")
        self.statuses: dict[str, dict[str, str]] = {}
        self.levels: dict[str, int] = {}
        self.warnings: dict[str, set[str]] = {}
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.on_diagnostics, RELIABLE)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def on_diagnostics(self, array) -> None:
        for status in array.status:
            name = status.name.split(":", 1)[0]
            self.statuses[name] = {kv.key: kv.value for kv in status.values}
            level = status.level[0] if isinstance(status.level, bytes) else int(status.level)  # a ROS byte
            self.levels[name] = max(self.levels.get(name, 0), level)
            if level > 0:  # WARN or ERROR: the reasons, each once
                self.warnings.setdefault(name, set()).add(status.message)

    def values(self, node: str) -> dict[str, str]:
        return dict(self.statuses.get(node, {}))

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown()


def config_for(args: argparse.Namespace):
    """The evaluation's configuration (as `act-sim eval` builds it from the checkpoint) and the graph's."""
    from act_node.cli import cameras_of_checkpoint, graph_config
    from act_node.config import shipped_checkpoint

    checkpoint = args.checkpoint or shipped_checkpoint()
    flags = argparse.Namespace(objects=args.objects, cameras=None, height=None, width=None, target="selector",
                               renderer="auto")
    cameras_of_checkpoint(flags, checkpoint)
    config = graph_config(flags, policy="act", checkpoint=checkpoint, episodes=args.episodes,
                          first_seed=args.first_seed)
    # as `act-sim eval --ros`: no velocity bound and one torch thread, as in-process; the sim's own timeout
    graph = config.replace(clock="lockstep", record_video=False, max_velocity=1e9, threads=1)
    return config, graph


def launch(arguments: dict[str, str], log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "act_node.cli", "launch", *(f"{k}:={v}" for k, v in arguments.items())]
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)


def soak(args: argparse.Namespace) -> dict:
    from tqdm import tqdm

    out = Path(args.out)
    results_dir = out / "graph_episodes"
    results_dir.mkdir(parents=True, exist_ok=True)
    for old in results_dir.glob("*.json"):
        old.unlink()
    config, graph = config_for(args)
    monitor = Monitor()
    memory: dict[str, dict] = {}  # episodes finished -> {node: MB}
    last: tuple[int, dict] | None = None  # the newest reading with every node alive
    started = time.monotonic()
    process = launch(graph.replace(video_dir=str(results_dir)).to_arguments(), out / "graph.log")
    peak: dict[str, float] = {}
    try:
        with tqdm(total=args.episodes, desc="graph episodes", unit="ep") as bar:
            while process.poll() is None:
                done = len(list(results_dir.glob("*.json")))
                bar.update(done - bar.n)
                reading = {name: resident_mb(pid) for name, pid in node_processes(process.pid).items()}
                for name, mb in reading.items():
                    peak[name] = max(peak.get(name, 0.0), mb or 0.0)
                if len(reading) >= 3 and None not in reading.values():  # sim, selector, policy
                    last = (done, reading)
                    if done >= args.memory_at and str(args.memory_at) not in memory:
                        memory[str(args.memory_at)] = reading
                time.sleep(0.5)
    except KeyboardInterrupt:
        process.terminate()
        process.wait()
        raise
    graph_s = time.monotonic() - started
    time.sleep(1.0)  # the last reports the nodes sent as they stopped
    policy_values, sim_values = monitor.values("act_policy"), monitor.values("act_sim")
    levels, warnings = dict(monitor.levels), {k: sorted(v) for k, v in monitor.warnings.items()}
    monitor.close()
    episodes = {e["seed"]: e for e in (json.loads(p.read_text()) for p in results_dir.glob("*.json"))}

    from act_node.evaluate import evaluate

    started = time.monotonic()
    alone = evaluate(config, out=out / "in_process", videos=0, workers=args.workers)
    alone_s = time.monotonic() - started
    alone_episodes = {e["seed"]: e for e in alone["per_episode"]}
    def same(graph: dict, alone: dict) -> bool:
        return all(graph[k] == alone[k] for k in COMPARED) and \
            abs(graph["sum_reward"] - alone["sum_reward"]) <= REWARD_RTOL * max(abs(alone["sum_reward"]), 1.0)

    differing = [seed for seed in alone_episodes if seed not in episodes or not same(episodes[seed],
                                                                                     alone_episodes[seed])]
    common = [seed for seed in alone_episodes if seed in episodes]
    reward_gap = max((abs(episodes[s]["sum_reward"] - alone_episodes[s]["sum_reward"]) for s in common), default=0.0)
    target_gap = max((abs((episodes[s]["target_error_m"] or 0.0) - (alone_episodes[s]["target_error_m"] or 0.0))
                      for s in common), default=0.0)

    def count(values: dict[str, str], key: str) -> int | None:
        return int(values[key]) if key in values else None

    sent, received = count(policy_values, "chunks_sent"), count(sim_values, "chunks_received")
    dropped, resent = count(policy_values, "chunks_dropped"), count(policy_values, "chunks_resent")
    published = None if None in (sent, resent) else sent + resent
    growth = {}
    if last is not None:
        memory[str(last[0])] = last[1]  # the last reading before the sim exited
    if str(args.memory_at) in memory and last is not None and last[0] > args.memory_at:
        first, span = memory[str(args.memory_at)], (last[0] - args.memory_at) / 100
        growth = {name: round((last[1][name] - first[name]) / span, 1) for name in first if name in last[1]}
    return {
        "checkpoint": config.checkpoint, "episodes": args.episodes, "first_seed": args.first_seed,
        "graph_exit_code": process.returncode, "graph_s": round(graph_s, 1), "in_process_s": round(alone_s, 1),
        "graph_episodes": len(episodes), "in_process_episodes": len(alone_episodes),
        "identical_to_in_process": len(alone_episodes) - len(differing), "differing_seeds": differing,
        "compared": f"{', '.join(COMPARED)} exactly; sum_reward within {REWARD_RTOL:.0%}",
        "max_sum_reward_gap": reward_gap, "max_target_error_gap_m": target_gap,
        "success_graph": sum(bool(e["success"]) for e in episodes.values()),
        "success_in_process": sum(bool(e["success"]) for e in alone_episodes.values()),
        "held_ticks": sum(e["held_ticks"] for e in episodes.values()),
        "interrupted": sum(e["interrupted"] is not None for e in episodes.values()),
        "memory_mb": memory, "peak_mb": {k: round(v, 1) for k, v in peak.items()},
        "memory_growth_mb_per_100_episodes": growth,
        # published = sent + re-sent (a lockstep sim said an observation again); a chunk computed for a run that
        # ended meanwhile is dropped by the policy, never published
        "chunks": {"sent": sent, "resent": resent, "dropped_by_policy": dropped, "published": published,
                   "received": received, "rejected": count(sim_values, "chunks_rejected"),
                   "published_not_received": None if None in (published, received) else published - received},
        "sim_final": sim_values, "policy_final": policy_values, "worst_levels": levels, "warnings": warnings,
    }


def hog(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def realtime(args: argparse.Namespace) -> dict:
    """The same realtime graph twice, `--seconds` each: alone, then with `--hogs` busy processes beside it."""
    config, _ = config_for(args)
    graph = config.replace(clock="realtime", episodes=0)  # as a user launches it: the defaults otherwise
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = {}
    for label, hogs in (("alone", 0), (f"{args.hogs} hogs", args.hogs)):
        monitor = Monitor()
        stop = multiprocessing.Event()
        busy = [multiprocessing.Process(target=hog, args=(stop,), daemon=True) for _ in range(hogs)]
        for worker in busy:
            worker.start()
        process = launch({**graph.to_arguments()}, out / f"realtime_{hogs}.log")
        factors = []
        end = time.monotonic() + args.seconds
        while time.monotonic() < end and process.poll() is None:
            time.sleep(1.0)
            value = monitor.values("act_sim").get("realtime_factor")
            if value is not None and monitor.values("act_sim").get("running") == "True":
                factors.append(float(value))
        process.terminate()
        process.wait(timeout=60)
        stop.set()
        for worker in busy:
            worker.join()
        time.sleep(1.0)
        sim, policy = monitor.values("act_sim"), monitor.values("act_policy")
        monitor.close()
        factors = factors[5:] or factors  # the first seconds load the checkpoint
        runs[label] = {
            "realtime_factor_mean": round(sum(factors) / max(len(factors), 1), 3),
            "realtime_factor_min": round(min(factors), 3) if factors else None,
            "episodes_done": sim.get("episodes_done"), "successes": sim.get("successes"),
            "chunks_sent": policy.get("chunks_sent"), "chunks_received": sim.get("chunks_received"),
            "late_chunks": sim.get("late_chunks"), "late_steps": sim.get("late_steps"),
            "held_ticks": sim.get("held_ticks"), "holds": sim.get("holds"),
            "clamped_ticks": sim.get("clamped_ticks"), "inference_mean_ms": policy.get("inference_mean_ms"),
            "inference_max_ms": policy.get("inference_max_ms"),
        }
    return {"seconds": args.seconds, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--first-seed", type=int, default=3000)
    parser.add_argument("--memory-at", type=int, default=50)
    parser.add_argument("--objects", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="in-process evaluation's processes")
    parser.add_argument("--checkpoint", default="", help="default: the shipped checkpoint (SHIPPED_MODEL)")
    parser.add_argument("--realtime", action="store_true", help="the realtime run with a CPU hog instead")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--out", default="outputs/soak")
    args = parser.parse_args()
    report = realtime(args) if args.realtime else soak(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / ("realtime.json" if args.realtime else "soak.json")
    path.write_text(json.dumps(report, indent=1) + "\n")
    shown = {k: v for k, v in report.items() if k not in ("sim_final", "policy_final")}
    print(json.dumps(shown, indent=1))
    print(f"report: {path}")


if __name__ == "__main__":
    main()
