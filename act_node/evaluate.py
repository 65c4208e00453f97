"""Evaluate a LeRobot checkpoint in the table-top: seeded episodes, the sim waiting for the policy.

Rollout semantics follow lerobot-eval: the policy is reset at each episode, observations go through the
checkpoint's preprocessor, the action chunk through its postprocessor, and the first `n_action_steps`
actions of each chunk are executed before the policy is asked again; a checkpoint whose config sets
`temporal_ensemble_coeff` is asked every step and runs ACT's temporal ensembling, as ACTPolicy.select_action does.
Every chunk goes through the graph's own executor (act_node.chunks.ChunkExecutor, in episodes.ChunkAgent), so each
merge rule runs here as in the graph. The env steps only when an action is there, so results do not depend on how fast
the machine is.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Iterator
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm import tqdm

from act_node.config import IMAGE_KEY, GraphConfig, camera_names_given, parse_rename_map  # noqa: F401 (theirs too)
from act_node.envs import make_env as make_pick_env
from act_node.episodes import EpisodeResult, policy_agent, run_episode
from act_node.lockstep import SLOTS, lockstep
from act_node.observation import requested_kind
from act_node.policy import ChunkPolicy, FeatureSpec
from act_node.report import draw_report, first_of_each_mode, outcome_summary, wilson_interval
from act_node.suites import Suite
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.video import write_video

GRASPED_REWARD = 0.3  # not held, a tick's reward is 0.3 x reach <= 0.3: past it, both jaws hold the object


def make_env(config: GraphConfig) -> PickObjectEnv:
    return make_pick_env(**config.env_kwargs())


def load_policy(config: GraphConfig, rename_map: dict[str, str] | None = None) -> ChunkPolicy:
    """The checkpoint, checked against what it will be fed: the config's cameras (under the names `rename_map`
    gives them, lerobot-eval's {"observation.images.<sim camera>": "observation.images.<its camera>"}), or none to
    a checkpoint that takes no images (a state-only lever; the env still renders for the videos)."""
    from act_node.checkpoints import readable_checkpoint_cameras

    takes_images = readable_checkpoint_cameras(config.checkpoint) != {}
    given = camera_names_given(rename_map or {})
    spec = FeatureSpec(cameras={given.get(name, name): config.image_size for name in config.cameras}
                       if takes_images else {})
    return ChunkPolicy.load(config.checkpoint, device=config.device, expect=spec, rename_map=rename_map)


def sim_cameras_for(checkpoint_cameras: list[str], rename_map: dict[str, str]) -> tuple[str, ...]:
    """The sim's camera that feeds each of the checkpoint's, in its order: renamed by `rename_map`, else its own
    name; ValueError when one has neither (naming the sim's cameras and the map that would do)."""
    from act_node.table_frame import CAMERA_NAMES

    feeds = {theirs: ours for ours, theirs in camera_names_given(rename_map).items()}
    unknown = [name for name in feeds if name not in checkpoint_cameras]
    if unknown:
        raise ValueError(f"--rename_map names {[IMAGE_KEY + n for n in unknown]}, which the checkpoint does not take "
                         f"(its cameras: {checkpoint_cameras})")
    missing = [name for name in checkpoint_cameras if name not in feeds and name not in CAMERA_NAMES]
    if missing:
        example = {f"{IMAGE_KEY}{ours}": f"{IMAGE_KEY}{theirs}" for ours, theirs in zip(CAMERA_NAMES, missing)}
        raise ValueError(f"the checkpoint's cameras {missing} are none of the sim's ({', '.join(CAMERA_NAMES)}): "
                         f"say which of the sim's feeds each with --rename_map, as lerobot-eval takes it, e.g. "
                         f"--rename_map '{json.dumps(example)}'")
    cameras = tuple(feeds.get(name, name) for name in checkpoint_cameras)
    if len(set(cameras)) != len(cameras):
        raise ValueError(f"the sim's camera {max(cameras, key=cameras.count)!r} would feed two of the checkpoint's "
                         f"cameras {checkpoint_cameras} (--rename_map {rename_map})")
    return cameras


def evaluate_episode(env: PickObjectEnv, policy: ChunkPolicy, seed: int, n_action_steps: int,
                     frames: list | None = None, render_every_tick: bool = False,
                     ensemble_coeff: float | None = None, merge: str | None = None) -> EpisodeResult:
    """One seeded episode of the checkpoint (and captioned frames appended to `frames` if given), its chunks
    `n_action_steps` at a time or, given `ensemble_coeff`, temporally ensembled (`merge`: any of
    act_node.chunks.MERGE_RULES, episodes.policy_agent). The cameras render only when
    something consumes the images: the policy at its re-plan ticks, a video every tick (`render_every_tick`
    renders every tick anyway, to show that skipping changes nothing)."""
    return run_episode(env, policy_agent(env, policy, n_action_steps, ensemble_coeff, merge), seed, frames=frames,
                       observe_every_tick=render_every_tick)


def execution(config: GraphConfig) -> tuple[int, str, float | None]:
    """How `config` runs its checkpoint in process, as the graph does: (ticks between chunks, the merge rule, the
    temporal ensembling coefficient or None unless it ensembles). merge auto is the checkpoint's own
    (GraphConfig.chunk_merge): ACT's temporal ensembling every tick, or chunks of n_action_steps, as lerobot-eval."""
    merge, coeff = config.chunk_merge()
    return config.replan_ticks(), merge, (coeff if merge == "ensemble" else None)


def make_envs(config: GraphConfig, count: int, envs: list[PickObjectEnv] | None = None) -> list[PickObjectEnv]:
    """`envs` grown to `count` envs of `config` (a lockstep's slots), the later ones sharing the first's Selector
    (it holds no episode state)."""
    envs = list(envs or [])
    while len(envs) < count:
        envs.append(make_pick_env(**config.env_kwargs(), **({"selector": envs[0].selector} if envs else {})))
    return envs


_WORKER: dict[tuple, tuple[list[PickObjectEnv], ChunkPolicy]] = {}  # a worker's envs and policy
_POOL_JOB: tuple | None = None  # a Pool worker's configuration, n_action_steps, rename map, slots, results queue


def _worker_objects(config: GraphConfig, steps: int, rename_map: dict[str, str] | None = None,
                    slots: int = 1) -> tuple[list[PickObjectEnv], ChunkPolicy]:
    """A worker process's `slots` envs and policy for this configuration, built on its first episodes and kept;
    torch on one thread (one core, and the same arithmetic as evaluate's own episodes)."""
    import torch

    torch.set_num_threads(1)
    job = (config, steps, json.dumps(rename_map or {}, sort_keys=True))
    if job not in _WORKER:
        for envs, _ in _WORKER.values():  # another checkpoint (a curve's next point): one set of envs per worker
            for env in envs:
                env.close()
        _WORKER.clear()
        _WORKER[job] = (make_envs(config, 1), load_policy(config, rename_map))
    envs, policy = _WORKER[job]
    envs[:] = make_envs(config, slots, envs)
    return envs[:slots], policy


def worker_episodes(config: GraphConfig, steps: int, seeds: list[int], rename_map: dict[str, str] | None = None,
                    slots: int = 1) -> Iterator[dict]:
    """Seeded episodes in a worker process, a Pool's or a Ray task's (act_node.distributed), `slots` side by side
    (act_node.lockstep), as each ends: the same episodes, bit for bit, as evaluate runs in its own process, so no
    result depends on where it ran."""
    envs, policy = _worker_objects(config, steps, rename_map, max(1, min(slots, len(seeds))))
    _, merge, coeff = execution(config)
    for result, _ in lockstep(envs, policy, seeds, steps, coeff, merge=merge):
        yield result.to_dict()


def worker_episode(config: GraphConfig, steps: int, seed: int, rename_map: dict[str, str] | None = None) -> dict:
    """One seeded episode in a worker process (worker_episodes of one seed)."""
    return next(worker_episodes(config, steps, [seed], rename_map))


def _start_worker(config: GraphConfig, steps: int, rename_map: dict[str, str] | None, slots: int, results) -> None:
    """Pool initializer: each worker builds its envs and loads the policy once, for all its episodes, which it
    puts on `results` as they end."""
    global _POOL_JOB
    _POOL_JOB = (config, steps, rename_map, slots, results)
    _worker_objects(config, steps, rename_map, 1)


def _worker_share(seeds: list[int]) -> int:
    config, steps, rename_map, slots, results = _POOL_JOB
    for episode in worker_episodes(config, steps, seeds, rename_map, slots):
        results.put(episode)
    return len(seeds)


def pool_episodes(config: GraphConfig, steps: int, seeds: list[int], workers: int,
                  rename_map: dict[str, str] | None = None, slots: int = 1) -> Iterator[dict]:
    """`seeds` shared among `workers` processes (every workers-th seed to each), each running its share `slots`
    side by side; yields the episodes as they end. A worker's error is raised here."""
    from queue import Empty

    context = get_context("spawn")
    results = context.Queue()
    count = min(workers, len(seeds))
    with context.Pool(count, _start_worker, (config, steps, rename_map, slots, results)) as pool:
        shares = [pool.apply_async(_worker_share, (seeds[start::count],)) for start in range(count)]
        for _ in seeds:
            while True:
                try:
                    episode = results.get(timeout=1.0)
                    break
                except Empty:
                    for share in shares:
                        if share.ready() and not share.successful():
                            share.get()  # raises the worker's error
            yield episode


JOURNAL = "episodes.jsonl"  # under an evaluation's out: its header, then one line per finished episode


def folder_digest(folder: str | Path, skip: tuple[str, ...] = ("README.md",)) -> str:
    """sha256 over the names and bytes of a folder's files (not its `skip`ped ones, nor below it): a checkpoint's
    weights, config and processors, or the yaw reader's head and the backbone hash its reader.json names."""
    from act_node.checkpoints import file_sha256

    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).iterdir() if p.is_file() and p.name not in skip):
        digest.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def source_digest() -> str:
    """sha256 of the act_node package's Python sources: the simulator, the expert's scenes and the policy's
    wrapping all live there, so an edited package is another evaluation."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def journal_header(config: GraphConfig, steps: int, coeff: float | None, merge: str = "replace") -> dict:
    """What decides an in-process episode's outcome besides its seed: the env's settings, the execution, the
    checkpoint folder's files, the yaw reader's where the layout reads one, the package's sources and the versions
    of torch, pybullet and LeRobot. Not the checkpoint's path, nor the graph's own settings (clock, respawn, ...)."""
    from importlib.metadata import version

    from act_node.paths import models_dir
    from act_node.perception.scene import default_model_dir
    from act_node.perception.yaw import DEFAULT_READER
    from act_node.table_frame import YAW_LAYOUTS

    env = config.env_kwargs()
    return {"env": env, "device": config.device, "n_action_steps": steps, "merge": merge,
            "temporal_ensemble_coeff": coeff, "checkpoint": folder_digest(config.checkpoint),
            "yaw_reader": folder_digest(models_dir() / DEFAULT_READER)
            if env["environment_layout"] in YAW_LAYOUTS else None,
            "scene_reader": folder_digest(env["scene_reader_model"] or default_model_dir())
            if env["scene"] == "cameras" else None,
            "act_node": source_digest(),
            "versions": {name: version(name) for name in ("torch", "pybullet", "lerobot")}}


class EpisodeJournal:
    """out/episodes.jsonl: what an evaluation ran with (journal_header, its first line), then each episode as it
    finishes, so that an evaluation a session's end, a SIGTERM or a crash cut short goes on from its finished
    episodes (`resume`). An episode is the same, bit for bit, wherever and whenever it runs with the same header
    (worker_episode), so a resumed report equals an uninterrupted one. A journal of another header is started anew;
    a torn line (a kill mid-write) is dropped; a line names the video it was filmed into, if any."""

    def __init__(self, out: Path, header: dict, resume: bool):
        self.path = out / JOURNAL
        self.header = json.loads(json.dumps(header))  # as read back (tuples as lists)
        self.done: dict[int, dict] = self._read() if resume else {}
        temporary = self.path.with_name(JOURNAL + ".partial")
        with open(temporary, "w") as journal:  # the header and what stays, replacing the old journal whole
            for line in [{"journal": self.header}, *self.done.values()]:
                journal.write(json.dumps(line) + "\n")
            journal.flush()
            os.fsync(journal.fileno())
        os.replace(temporary, self.path)  # a kill before this leaves the old journal as it was
        self._file = open(self.path, "a")

    def _read(self) -> dict[int, dict]:
        if not self.path.is_file():
            return {}
        lines = self.path.read_text().splitlines()
        try:
            if json.loads(lines[0]).get("journal") != self.header:
                tqdm.write(f"{self.path}: another checkpoint, settings or package version; evaluating anew",
                           file=sys.stderr)
                return {}
        except (IndexError, json.JSONDecodeError, AttributeError):
            return {}
        done = {}
        for line in lines[1:]:
            try:
                entry = json.loads(line)
                done[int(entry["episode"]["seed"])] = entry
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):  # a torn line: that episode runs again
                continue
        return done

    def finished(self, seed: int, video: Path | None = None) -> dict | None:
        """The journalled episode of `seed`, or None; with `video`, only if it was filmed there and that file is
        still there."""
        entry = self.done.get(seed)
        if entry is None or (video is not None and (entry.get("video") != video.name or not video.is_file())):
            return None
        return entry["episode"]

    def add(self, episode: dict, video: Path | None = None) -> dict:
        self._file.write(json.dumps({"episode": episode, "video": video.name if video else None}) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        return episode

    def close(self) -> None:
        self._file.close()


def evaluate(config: GraphConfig, out: str | Path = "outputs/eval", videos: int = 2, workers: int = 1,
             ray: str | None = None, resume: bool = False, rename_map: dict[str, str] | None = None,
             suite: Suite | None = None, batch: int = SLOTS) -> dict:
    """`config.episodes` episodes from `config.first_seed` of the checkpoint `config.checkpoint`, re-planning
    every `config.replan_every` steps (0: the checkpoint's n_action_steps); writes report.json and videos of the
    first `videos` episodes and of one episode of each mode that occurred (act_node.tabletop.outcomes; none when
    `videos` is 0), with their first and last frames, and report.png (act_node.report.draw_report) under `out`;
    returns the report. The filmed episodes run here; the rest in `workers`
    processes, or with `ray` as Ray tasks (act_node.distributed: "local", a cluster started here; "auto" or
    HOST:PORT, a running one). Ctrl-C writes the report of the episodes that finished, then raises
    KeyboardInterrupt. Each finished episode goes to out/episodes.jsonl (EpisodeJournal); `resume` runs only the
    seeds that journal lacks (a filmed seed also when it was not filmed into the video that is there), if its
    header (journal_header: settings, checkpoint, package) is this evaluation's. `suite`: its seeds and object count
    instead of config's (act_node.suites). `batch`: episodes side by side in each process, one batched policy call
    a tick over them (act_node.lockstep); an episode comes out the same whatever the batch."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(config.first_seed, config.first_seed + config.episodes))
    if suite is not None:  # its seeds and object count (act_node.suites), whatever config says
        seeds, config = list(suite.seeds), config.replace(objects=suite.objects, episodes=len(suite.seeds),
                                                          first_seed=suite.seeds[0])
    if rename_map and ray is not None:
        raise ValueError("--rename_map runs in this process or in --workers; Ray tasks take none yet: drop --ray")
    policy = load_policy(config, rename_map)  # fails here, clearly, on a mismatched checkpoint
    steps, merge, coeff = execution(config)
    if not 1 <= steps <= policy.chunk_size:
        raise ValueError(f"n_action_steps must be 1..{policy.chunk_size} (the chunk size), got {steps}")
    if batch < 1:
        raise ValueError(f"batch is the episodes run side by side in a process, at least 1, got {batch}")
    filmed, rest = seeds[:videos], seeds[videos:]
    given = camera_names_given(rename_map or {})
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the workers: the same arithmetic, so results do not depend on `workers`
    mismatch = config.renderer_mismatch()
    if mismatch:
        tqdm.write(f"warning: {mismatch}", file=sys.stderr)
    env = make_env(config)
    renderer = env.renderer
    config = config.replace(renderer=renderer)  # "auto" resolved once: the workers draw with the same one

    def video(seed: int) -> Path:
        return out / f"episode_seed{seed}.mp4"

    def stills(seed: int) -> tuple[Path, Path]:
        return out / "stills" / f"seed{seed}_first.png", out / "stills" / f"seed{seed}_last.png"

    envs = [env]

    def here(seeds_here: list[int], film: list[int]) -> Iterator[dict]:
        """The episodes of `seeds_here` in this process, `batch` side by side, those of `film` filmed (their video
        and their first and last frames for the report's picture), each journalled as it ends."""
        envs[:] = make_envs(config, max(1, min(batch, len(seeds_here))), envs)
        for result, frames in lockstep(envs[:max(1, min(batch, len(seeds_here)))], policy, seeds_here, steps, coeff,
                                       film=film, merge=merge):
            episode = result.to_dict()
            if frames is None:
                yield journal.add(episode)
                continue
            write_video(frames + [frames[-1]] * env.fps, video(result.seed), env.fps)
            filmed_here.add(result.seed)
            for frame, still in zip((frames[0], frames[-1]), stills(result.seed)):
                still.parent.mkdir(exist_ok=True)
                Image.fromarray(frame).save(still)
            yield journal.add(episode, video(result.seed))  # after its video: a journalled filmed seed has one

    episodes: list[dict] = []
    journal: EpisodeJournal | None = None
    resumed, interrupted = 0, False
    mode_seeds: dict[str, int] = {}
    filmed_here: set[int] = set()  # seeds filmed by this call
    progress = None
    try:
        header = journal_header(config, steps, coeff, merge) | ({"rename_map": rename_map} if rename_map else {})
        journal = EpisodeJournal(out, header, resume)
        episodes = [e for e in (journal.finished(seed, video(seed) if seed in filmed else None) for seed in seeds)
                    if e is not None]
        resumed = len(episodes)
        filmed = [seed for seed in filmed if journal.finished(seed, video(seed)) is None]
        rest = [seed for seed in rest if journal.finished(seed) is None]
        if resumed:
            tqdm.write(f"{resumed} of {len(seeds)} episodes read from {journal.path}", file=sys.stderr)
        progress = tqdm(total=len(seeds), initial=resumed, desc="evaluating", unit="episode")
        elsewhere = bool(rest) and (ray is not None or workers > 1)
        for episode in here(filmed + ([] if elsewhere else rest), filmed):  # filmed ones always in this process
            episodes.append(episode)
            progress.update(1)
        if rest and ray is not None:
            from contextlib import closing

            from act_node.distributed import ray_episodes

            # closed (Ctrl-C): the rest cancelled
            with closing(ray_episodes(config, steps, rest, worker_episode, ray)) as finished:
                for episode in finished:  # as they finish
                    episodes.append(journal.add(episode))
                    progress.update(1)
        elif rest and workers > 1:
            for episode in pool_episodes(config, steps, rest, workers, rename_map, batch):
                episodes.append(journal.add(episode))
                progress.update(1)
        if videos > 0 and outcome_summary(episodes):
            mode_seeds = first_of_each_mode(episodes, prefer=set(seeds[:videos]))
        for mode, seed in mode_seeds.items():  # one episode of each mode on film: run again, the same bit for bit
            on_film = seed in filmed_here or journal.finished(seed, video(seed)) is not None
            if on_film and all(still.is_file() for still in stills(seed)):
                continue
            again = next(here([seed], [seed]))  # journalled with its video: a resumed evaluation finds it
            if again["outcome"] != mode:
                tqdm.write(f"warning: seed {seed} ended '{again['outcome']}' when filmed, '{mode}' before: the "
                           "episode did not repeat", file=sys.stderr)
    except KeyboardInterrupt:
        if not episodes:
            raise
        interrupted = True  # the finished episodes are reported below
    finally:
        for each in envs:
            each.close()
        if journal is not None:
            journal.close()
        if progress is not None:
            progress.close()
        torch.set_num_threads(threads)
    report = {
        "policy": str(config.checkpoint),
        **summarize(episodes),
        "mean_inference_s": float(np.mean([e["mean_inference_s"] for e in episodes])),
        "n_action_steps": steps,
        "merge": merge,
        "temporal_ensemble_coeff": coeff,  # None: chunks of n_action_steps, without ensembling
        "renderer": renderer,
        # which of the sim's cameras each of the checkpoint's cameras is given (--rename_map, else its own name)
        "cameras_given": {given.get(name, name): name for name in config.cameras} if policy.camera_names else {},
        "settings": {**config.chosen(), "videos": videos, "workers": workers, "ray": ray, "rename_map": rename_map,
                     "batch": batch},
        "videos": [str(out / f"episode_seed{seed}.mp4") for seed in seeds[:videos]],
        # one episode of each mode that occurred: its video and its first and last frames (drawn in report.png)
        "outcome_videos": {mode: str(video(seed)) for mode, seed in mode_seeds.items() if video(seed).is_file()},
        "outcome_stills": {mode: [str(still) for still in stills(seed)] for mode, seed in mode_seeds.items()
                           if all(still.is_file() for still in stills(seed))},
        "picture": str(out / "report.png"),
        "suite": suite.to_dict() if suite is not None else None,  # act-sim eval --suite: which seed set, version
        "resumed_episodes": resumed,  # read from out/episodes.jsonl, run before (resume)
        "per_episode": sorted(episodes, key=lambda e: e["seed"]),
    }
    if interrupted:
        report["stopped_by"] = "SIGINT"  # of the config.episodes asked for, report["episodes"] finished
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    draw_report(report, out / "report.png", {mode: tuple(map(Path, files))
                                             for mode, files in report["outcome_stills"].items()})
    if interrupted:
        raise KeyboardInterrupt(f"stopped after {len(episodes)} of {len(seeds)} episodes; {out / 'report.json'} "
                                f"reports them")
    return report


def summarize(episodes: list[dict]) -> dict:
    """Episode count, success rate with its 95% interval, why the episodes ended (each mode of
    act_node.tabletop.outcomes overall and by requested kind, with 95% intervals: act_node.report.outcome_summary),
    mean summed reward and mean length. The episodes
    are taken in seed order, so the float sums do not depend on the order workers finished in."""
    episodes = sorted(episodes, key=lambda e: e["seed"])
    successes = sum(e["success"] for e in episodes)
    grasps = sum(e.get("max_reward", 0.0) > GRASPED_REWARD for e in episodes)
    outcomes = outcome_summary(episodes)  # why each episode ended (act_node.tabletop.outcomes), by kind too
    sources = Counter(e["grasp_source"] for e in episodes if e.get("grasp_source"))
    return {"episodes": len(episodes), "success_rate": successes / len(episodes),
            "success_ci95": list(wilson_interval(successes, len(episodes))),
            "mean_sum_reward": float(np.mean([e["sum_reward"] for e in episodes])),
            "mean_episode_length": float(np.mean([e["steps"] for e in episodes])),
            # both jaws held the requested object at some tick (the dense reward's 0.2 for holding puts the
            # tick's reward past GRASPED_REWARD): progress that success, which also needs the lift, hides
            "grasp_rate": grasps / len(episodes), "grasp_ci95": list(wilson_interval(grasps, len(episodes))),
            # how often the executor or the env had to pull a command into range (or under the velocity bound)
            "episodes_clamped": sum(e.get("clamped_joints", 0) > 0 for e in episodes),
            # the Selector judged the requested kind absent although it stood there (the truth stood in)
            "selector_misses": sum(not e.get("selector_found", True) for e in episodes),
            # the policy lifted an object that was not requested (a distractor): the target's worth shows here
            "picked_other": sum(any(k != requested_kind(e["task"]) for k in e.get("lifted", [])) for e in episodes),
            "max_target_error_m": max((e["target_error_m"] for e in episodes
                                       if math.isfinite(e.get("target_error_m") or math.inf)), default=None),
            # target_tool_yaw_grasp: how many episodes had their grasp planned from what (scene, target alone, none)
            **({"grasp_sources": dict(sorted(sources.items()))} if sources else {}),
            **(outcomes or {})}
