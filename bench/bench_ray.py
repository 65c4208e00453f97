"""Ray on two nodes of this machine: the same evaluation on one node and on two, and Ray's cost an episode
against `--workers`.

`ray start` runs a head (--num-cpus 1) on 127.0.0.1 and, for the second half, a second node (--num-cpus 1,
--address of the head), each in a temporary folder of its own; this process is the driver, connected as
`act-sim eval --ray 127.0.0.1:PORT` connects (act_node.distributed). Every way runs the same seeds:

  local    act_node.evaluate.worker_episode in this process, torch on one thread: what `--workers 1` runs
  1 node   the seeds as Ray tasks (act_node.distributed.ray_episodes) on the head alone: 1 CPU
  2 nodes  the same after the second node joined: 2 CPUs

Each way starts with a warm-up round (one episode a CPU, other seeds), so that the rates are those of a running
evaluation; the warm-up's time (a worker process started on each node, the checkpoint shipped and loaded) is
printed beside them. Printed: episodes per minute each way, the two-node / one-node ratio, Ray's overhead an
episode ((1 node - local) / episodes: a task's scheduling, its arguments and result through the object store),
and whether every seed's result (success, length, summed reward) agrees across the three. The cluster is stopped
at the end, also on an error or Ctrl-C (`ray stop`: every Ray process of this machine).

Everything stays on 127.0.0.1: Ray turns a loopback address given to `ray start --address` or ray.init into the
machine's outward one (services.resolve_ip_for_localhost), which this bench undoes, in `ray start` and in its
driver. The cluster has token authentication (Ray's default) with a token of its own (RAY_AUTH_TOKEN), which
a driver joining by address uses only with RAY_AUTH_MODE=token.

Run: .venv/bin/python bench/bench_ray.py [--policy.path models/act_pick] [--episodes 12] [--port 6390]
"""

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
RAY = str(Path(sys.executable).with_name("ray"))
KEYS = ("success", "steps", "sum_reward")
# `ray start` with loopback left as loopback
RAY_START = ("import ray._private.services as services; services.resolve_ip_for_localhost = lambda host: host; "
             "from ray.scripts.scripts import main; main()")


def ray_start(*arguments: str, temp_dir: Path) -> None:
    command = [sys.executable, "-c", RAY_START, "start", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
               "--disable-usage-stats", f"--temp-dir={temp_dir}", *arguments]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")


def wait_for_cpus(cpus: int, seconds: float = 60.0) -> None:
    import ray

    deadline = time.time() + seconds
    while ray.cluster_resources().get("CPU", 0) < cpus:
        if time.time() > deadline:
            raise SystemExit(f"the cluster has {ray.cluster_resources().get('CPU', 0)} CPUs after {seconds} s, "
                             f"not {cpus}")
        time.sleep(0.5)


def on_ray(config, steps: int, seeds: list[int], warm_up: list[int]) -> tuple[float, float, dict[int, tuple]]:
    """(warm-up seconds, seconds for `seeds`, results by seed)."""
    from act_node.distributed import ray_episodes
    from act_node.evaluate import worker_episode

    started = time.perf_counter()
    list(ray_episodes(config, steps, warm_up, worker_episode, address=None))
    warm = time.perf_counter() - started
    started = time.perf_counter()
    finished = ray_episodes(config, steps, seeds, worker_episode, address=None)
    results = {e["seed"]: tuple(e[k] for k in KEYS) for e in finished}
    return warm, time.perf_counter() - started, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy.path", dest="policy_path", default="models/act_pick")
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--objects", type=int, default=4)
    parser.add_argument("--port", type=int, default=6390, help="the head's GCS port on 127.0.0.1")
    args = parser.parse_args()
    # the cluster's token, for the nodes and this driver: set before Ray loads (it reads them once)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    import ray

    from act_node.checkpoints import checkpoint_cameras
    from act_node.config import DEFAULT_CAMERAS, TRAIN_IMAGE_SIZE, GraphConfig
    from act_node.distributed import connect
    from act_node.evaluate import load_policy, make_env, worker_episode

    cameras = checkpoint_cameras(args.policy_path)  # as act-sim eval: the checkpoint's cameras and size
    size = next(iter(set(cameras.values())), TRAIN_IMAGE_SIZE)
    config = GraphConfig(policy="act", checkpoint=str(Path(args.policy_path).resolve()), episodes=args.episodes,
                         first_seed=args.first_seed, objects=args.objects,
                         cameras=tuple(cameras) or DEFAULT_CAMERAS, image_height=size[0], image_width=size[1])
    env = make_env(config)
    config = config.replace(renderer=env.renderer)  # resolved once, as evaluate does
    env.close()
    steps = config.replan_every or load_policy(config).config.n_action_steps
    seeds = list(range(args.first_seed, args.first_seed + args.episodes))

    # local: --workers 1, in this process (the warm-up builds the env and loads the policy)
    started = time.perf_counter()
    worker_episode(config, steps, args.first_seed - 100)
    local_warm = time.perf_counter() - started
    started = time.perf_counter()
    local = {seed: tuple(worker_episode(config, steps, seed)[k] for k in KEYS) for seed in seeds}
    local_before_s = time.perf_counter() - started

    folder = Path(tempfile.mkdtemp(prefix="bench_ray_", dir="/tmp"))  # short: Ray's socket paths must fit
    address = f"127.0.0.1:{args.port}"
    try:
        started = time.perf_counter()
        ray_start("--head", f"--port={args.port}", "--include-dashboard=false", temp_dir=folder / "head")
        head_s = time.perf_counter() - started
        import ray._private.services as services

        services.resolve_ip_for_localhost = lambda host: host  # this driver on loopback too
        ray.init(address=address, _node_ip_address="127.0.0.1")  # as connect(address) does, on loopback
        connect(address)  # already connected: nothing
        wait_for_cpus(1)
        one_warm, one_s, one = on_ray(config, steps, seeds, [args.first_seed - 100])
        started = time.perf_counter()
        ray_start(f"--address={address}", temp_dir=folder / "node2")
        wait_for_cpus(2)
        node_s = time.perf_counter() - started
        nodes = {n["NodeManagerAddress"] + ":" + str(n["NodeManagerPort"]) for n in ray.nodes() if n["Alive"]}
        two_warm, two_s, two = on_ray(config, steps, seeds, [args.first_seed - 100, args.first_seed - 99])
    finally:
        if ray.is_initialized():
            ray.shutdown()
        subprocess.run([RAY, "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()  # local again, after: a shared machine's load moves; the mean of the two counts
    again = {seed: tuple(worker_episode(config, steps, seed)[k] for k in KEYS) for seed in seeds}
    local_after_s = time.perf_counter() - started
    local_s = (local_before_s + local_after_s) / 2
    print(f"local runs: {local_before_s:.1f} s before the cluster, {local_after_s:.1f} s after; results "
          f"{'identical' if again == local else 'DIFFER'}")
    n = len(seeds)
    rate = {name: 60 * n / seconds for name, seconds in (("local", local_s), ("1 node", one_s), ("2 nodes", two_s))}
    print(f"{n} episodes, seeds {seeds[0]}-{seeds[-1]}, {args.objects} objects, checkpoint {args.policy_path}; "
          f"cluster: head started in {head_s:.1f} s, the second node joined in {node_s:.1f} s, nodes {sorted(nodes)}")
    for name, seconds, warm in (("local (--workers 1)", local_s, local_warm), ("Ray, 1 node, 1 CPU", one_s, one_warm),
                                ("Ray, 2 nodes, 1 CPU each", two_s, two_warm)):
        print(f"{name:26} {seconds:7.1f} s  {60 * n / seconds:6.2f} episodes/min  (warm-up round {warm:5.1f} s)")
    print(f"2 nodes / 1 node: {rate['2 nodes'] / rate['1 node']:.2f}x episodes per minute")
    print(f"Ray's overhead an episode against --workers 1 on one node: {(one_s - local_s) / n * 1000:.0f} ms "
          f"({(one_s - local_s) / local_s:+.1%} of the local time)")
    agree = sum(local[s] == one[s] == two[s] for s in seeds)
    print(f"success, length and summed reward identical in {agree}/{n} seeds across the three; success "
          f"{sum(r[0] for r in local.values())}/{n}")


if __name__ == "__main__":
    main()
