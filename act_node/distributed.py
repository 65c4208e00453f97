"""Episodes on a Ray cluster: `act-sim eval --ray`, `act-lab curve --ray` and `act-sim record --ray`.

    act-sim (the driver)                      Ray tasks, on any node of the cluster (num_cpus=1 each)
      eval/curve: one task a seed      ->       the env and the policy (built once per worker process,
                  (the filmed seeds run here)   kept for its next tasks), torch on one thread, one episode:
                                                act_node.evaluate.worker_episode, as a Pool worker runs it
      record: one task a shard         ->       act_node.record.record over a contiguous range of seeds,
              (a range of seeds)                into a LeRobotDataset of its own in a temporary folder;
                                                its files come back through Ray's object store
      the shards in seed order         <-       merged with LeRobot's aggregate_datasets into --root

A task needs only the package installed (the same setup on every node) and what comes with it through the
object store: the checkpoint's files (put once, written to a temporary folder once per worker process), the
env's settings; a shard comes back as its files. No folder has to be shared between the nodes.

The results are those of the local run for the same seeds: one episode is the same arithmetic wherever it runs
(one torch thread, an env reset by the seed), results are keyed by seed, and a recording tries its seeds in
waves of exactly the episodes still missing, which ends on the seed a serial recording ends on.
A worker process that dies (killed, out of memory, its node lost) is retried by Ray (`max_retries`); a task
that raises is not (the error is the same on a retry). Ctrl-C or SIGTERM cancels the outstanding tasks and
keeps what finished: an evaluation reports its finished episodes; a recording merges its finished shards
(the shards in flight are dropped whole, at most a shard a CPU).

ADDRESS: "local" (or none) starts a cluster in this process (ray.init on 127.0.0.1, every core, no
dashboard); "auto" joins the cluster `ray start` runs on this machine; HOST:PORT the one whose head is there.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

LOCAL = "local"
MAX_RETRIES = 3  # a task whose worker process dies runs again, up to this many times
SHARD_SEEDS = 5  # at most this many seeds a recording task: what Ctrl-C drops of a task in flight
# the workers' environment: no progress bars of their own (the driver shows one), nothing from a hub
TASK_ENV = {"TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1"}


def connect(address: str | None = LOCAL) -> None:
    """Join the cluster at `address`, or start one here ("local", None, ""); nothing if Ray is already
    initialized in this process (a test's own ray.init, a curve's earlier point)."""
    import ray

    if ray.is_initialized():
        return
    if address in (None, "", LOCAL):
        ray.init(include_dashboard=False, _node_ip_address="127.0.0.1")
    else:
        ray.init(address=address)


def _cancel(refs) -> None:
    """Cancel tasks, killing those that run (a cancelled task is not retried)."""
    import ray

    for ref in refs:
        try:
            ray.cancel(ref, force=True)
        except Exception:  # noqa: BLE001 (finished meanwhile, or its worker gone: nothing left to cancel)
            pass


# ---------------------------------------------------------------------------------------------- evaluation

_CHECKPOINTS: dict[str, str] = {}  # a worker process's copies of shipped checkpoints, by digest


def _folder_files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def _write_files(files: dict[str, bytes], folder: Path) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def ship_checkpoint(folder: str | Path) -> tuple[str, list]:
    """The checkpoint folder's files in Ray's object store, once: (digest, [ref]); the ref in a list so that a
    task receives it as a ref and fetches the files only where its node has no copy yet."""
    import ray

    files = _folder_files(Path(folder))
    digest = hashlib.sha256()
    for name, content in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()[:16], [ray.put(files)]


def local_checkpoint(shipped: tuple[str, list]) -> str:
    """The shipped checkpoint as a folder on this node (temporary folder/act_node_ray/DIGEST), written once."""
    import ray

    digest, (ref,) = shipped
    if digest not in _CHECKPOINTS:
        folder = Path(tempfile.gettempdir()) / "act_node_ray" / digest
        if not (folder / "config.json").is_file():
            folder.parent.mkdir(parents=True, exist_ok=True)
            partial = Path(tempfile.mkdtemp(prefix=f".{digest}.", dir=folder.parent))
            _write_files(ray.get(ref), partial)
            try:
                os.rename(partial, folder)  # whole or not at all; another worker of this node may have won
            except OSError:
                shutil.rmtree(partial, ignore_errors=True)
        _CHECKPOINTS[digest] = str(folder)
    return _CHECKPOINTS[digest]


def _episode_task(config, steps: int, seed: int, shipped: tuple[str, list], episode: Callable) -> dict:
    """A Ray task: one seeded episode of the shipped checkpoint (`episode`: act_node.evaluate.worker_episode)."""
    return episode(config.replace(checkpoint=local_checkpoint(shipped)), steps, seed)


def ray_episodes(config, steps: int, seeds: list[int], episode: Callable,
                 address: str | None = LOCAL) -> Iterator[dict]:
    """The episodes of `seeds` (act_node.evaluate's GraphConfig and n_action_steps) as Ray tasks, yielded as they
    finish, each seed once. `episode(config, steps, seed) -> dict`: act_node.evaluate.worker_episode (passed in:
    this module imports nothing of evaluate's), or a test's that kills its worker. Closing the generator
    (Ctrl-C) cancels the outstanding tasks."""
    import ray

    connect(address)
    shipped = ship_checkpoint(config.checkpoint)
    task = ray.remote(_episode_task).options(num_cpus=1, max_retries=MAX_RETRIES,
                                             runtime_env={"env_vars": TASK_ENV})
    pending = {task.remote(config, steps, seed, shipped, episode): seed for seed in seeds}
    done: set[int] = set()
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                seed = pending.pop(ref)
                result = ray.get(ref)
                if seed not in done:  # keyed by seed: never counted twice
                    done.add(seed)
                    yield result
    finally:
        _cancel(pending)


# ----------------------------------------------------------------------------------------------- recording

_SHARD_ENV: dict = {}  # a worker process's env for recording, by its settings


def _env(settings: dict):
    from act_node.envs import make_env

    key = tuple(sorted(settings.items()))
    if key not in _SHARD_ENV:
        for env in _SHARD_ENV.values():
            env.close()
        _SHARD_ENV.clear()
        _SHARD_ENV[key] = make_env(**settings)
    return _SHARD_ENV[key]


def record_shard(settings: dict, repo_id: str, start: int, stop: int, options: dict) -> dict:
    """A Ray task: seeds start..stop-1 recorded by act_node.record.record (`options`: its keep_failures,
    after_success, action_noise) into a dataset of their own in a temporary folder; returned as its files
    ({} when no episode was kept) with the seeds it kept and those it could not plan."""
    import torch

    from act_node.record import SeedRecord, TooFewEpisodes, record

    torch.set_num_threads(1)  # one core, as declared
    env = _env(settings)
    with tempfile.TemporaryDirectory(prefix="act_node_shard_") as folder:
        root = Path(folder) / "shard"
        try:
            summary = record(env, repo_id, root, stop - start, first_seed=start, max_attempts=stop - start,
                             **options)
        except TooFewEpisodes as error:  # fewer kept than tried: raised after finalizing, the shard holds them
            summary = error.summary
        unplannable = summary.unplannable_seeds
        seeds = SeedRecord.read(root)
        return {"start": start, "stop": stop, "episode_seeds": seeds.episode_seeds,
                "episode_noise": seeds.episode_noise, "unplannable": unplannable,
                "files": _folder_files(root) if seeds.episode_seeds else {}}


def _ranges(first: int, count: int, size: int) -> list[tuple[int, int]]:
    return [(start, min(start + size, first + count)) for start in range(first, first + count, size)]


def _spec(settings: dict):
    from act_node.record import DatasetSpec

    return DatasetSpec.of_cameras({name: settings["image_size"] for name in settings["cameras"]}, settings["fps"],
                                  renderer=settings["renderer"], object_count=settings["objects"],
                                  environment_layout=settings.get("environment_layout", "target"))


def merge_shards(shards: list[Path], root: Path, repo_id: str, seeds, settings: dict) -> None:
    """The shards, in the order given, into one dataset at `root` with LeRobot's aggregate_datasets; then
    act-sim record's own metadata: meta/act_node_seeds.json (`seeds`, a SeedRecord) and the renderer file.
    No shard: an empty dataset, as a serial recording that kept nothing leaves."""
    from lerobot.datasets.aggregate import aggregate_datasets

    from act_node.checkpoints import write_renderer
    from act_node.record import create_dataset

    if shards:
        aggregate_datasets([repo_id] * len(shards), repo_id, roots=list(shards), aggr_root=root)
        if settings["renderer"] is not None:
            write_renderer(root / "meta", settings["renderer"])
    else:
        dataset, _ = create_dataset(_spec(settings), repo_id, root)
        dataset.finalize()
    seeds.write(root)


def record_ray(settings: dict, repo_id: str, root: str | Path, episodes: int, first_seed: int = 0,
               keep_failures: bool = False, after_success: int = 0, action_noise: float = 0.0,
               address: str | None = LOCAL, shard_seeds: int | None = None, shard: Callable = record_shard):
    """Record `episodes` expert episodes into a new dataset at `root`, as act_node.record.record does (seeds from
    `first_seed`, at most 3 x episodes tried), the seeds recorded by Ray tasks in shards and merged in seed order.
    `settings`: PickObjectEnv's keyword arguments with the renderer resolved (what the driver's env drew with:
    every node draws the same). `shard_seeds`: seeds a task (default: the seeds of a wave over the cluster's CPUs,
    at most SHARD_SEEDS). `shard`: the task's function (record_shard; a test's, which kills its worker).
    Returns act_node.record.RecordSummary."""
    import ray
    from tqdm import tqdm

    from act_node.record import RecordSummary
    from act_node.stops import StopRequests
    from act_node.tabletop.perturb import ActionNoise

    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"dataset folder {root} already exists and is not empty: choose another --root "
                              f"(--ray records new datasets; --resume goes on without it)")
    if settings["renderer"] in (None, "auto"):
        raise ValueError("record_ray needs the renderer resolved (the driver's env.renderer), not 'auto'")
    ActionNoise(action_noise, 0)  # refuses a bad scale here, before any task starts
    if after_success < 0:
        raise ValueError(f"after_success must be >= 0 frames, got {after_success}")
    connect(address)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    staging = root.parent / f".{root.name}.shards"  # the shards that came back, until they are merged
    shutil.rmtree(staging, ignore_errors=True)  # a killed run's
    task = ray.remote(shard).options(num_cpus=1, max_retries=MAX_RETRIES, runtime_env={"env_vars": TASK_ENV})
    options = {"keep_failures": keep_failures, "after_success": after_success, "action_noise": action_noise}
    finished: dict[int, dict] = {}  # by first seed: each shard's seeds, never twice
    attempts, tried, pending = 3 * episodes, 0, {}
    started = time.perf_counter()
    progress = tqdm(total=episodes, desc="recording", unit="episode")
    saved = 0
    with StopRequests() as stop:
        try:
            while saved < episodes and tried < attempts and not stop.signal_name:
                # a wave of exactly the episodes still missing: at most that many are kept, so the recording
                # ends on the seed a serial one ends on
                count = min(episodes - saved, attempts - tried)
                size = shard_seeds or max(1, min(SHARD_SEEDS, math.ceil(count / cpus)))
                pending = {task.remote(settings, repo_id, start, end, options): (start, end)
                           for start, end in _ranges(first_seed + tried, count, size)}
                tried += count
                while pending and not stop.signal_name:
                    ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                    for ref in ready:
                        start, _ = pending.pop(ref)
                        result = ray.get(ref)
                        if start in finished:
                            continue
                        if result["files"]:
                            _write_files(result.pop("files"), staging / f"{start:010d}")
                        finished[start] = result
                        saved += len(result["episode_seeds"])
                        progress.update(len(result["episode_seeds"]))
                        progress.set_postfix(tasks_left=len(pending))
            if pending:
                dropped = ", ".join(f"{start}-{end - 1}" for start, end in sorted(pending.values()))
                tqdm.write(f"{stop.signal_name}: cancelled the {len(pending)} recording tasks in flight (seeds "
                           f"{dropped}); merging the {len(finished)} that finished", file=sys.stderr)
        except BaseException as error:
            _cancel(pending)
            progress.close()
            seeds = _merge(finished, staging, root, repo_id, settings, first_seed, after_success)
            error.add_note(f"recording stopped; the dataset at {root} keeps the {len(seeds.episode_seeds)} "
                           f"episodes of the shards that finished (seeds {seeds.episode_seeds})")
            raise
        finally:
            _cancel(pending)
            progress.close()
    seeds = _merge(finished, staging, root, repo_id, settings, first_seed, after_success)
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    meta = LeRobotDatasetMetadata(repo_id, root=root)
    tried_seeds = sorted(s for r in finished.values() for s in range(r["start"], r["stop"]))
    kept = set(seeds.episode_seeds)
    summary = RecordSummary(root, meta.total_episodes, [s for s in tried_seeds if s not in kept], meta.total_frames,
                            time.perf_counter() - started,
                            sorted(s for r in finished.values() for s in r["unplannable"]), meta.total_episodes,
                            meta.total_frames, stop.signal_name, 0)
    if summary.recorded < episodes and stop.signal_name is None:
        raise RuntimeError(f"only {summary.recorded} of {episodes} episodes succeeded in {attempts} seeds "
                           f"(failed seeds: {summary.skipped_seeds}, of which unplannable: "
                           f"{summary.unplannable_seeds}); the dataset at {root} holds those {summary.recorded}")
    return summary


def _merge(finished: dict[int, dict], staging: Path, root: Path, repo_id: str, settings: dict, first_seed: int,
           after_success: int):
    """The finished shards merged in seed order into `root`, the staging folder removed; the SeedRecord."""
    from act_node.record import SeedRecord

    seeds = SeedRecord([], first_seed, settings["objects"], after_success)
    shards = []
    for start in sorted(finished):
        result = finished[start]
        for seed, noise in zip(result["episode_seeds"], result["episode_noise"], strict=True):
            seeds.add(seed, noise)
        seeds.next_seed = max(seeds.next_seed, result["stop"])  # the first seed after those tried
        if result["episode_seeds"]:
            shards.append(staging / f"{start:010d}")
    merge_shards(shards, root, repo_id, seeds, settings)
    shutil.rmtree(staging, ignore_errors=True)
    return seeds
