"""Expert demonstrations as a LeRobotDataset (v3.0): one episode per seed, written with LeRobot's own writer.

Features (LeRobot's SO-101 names and units):
  observation.state              (6,) float32  joint positions, degrees and gripper 0-100 (`<joint>.pos`)
  observation.environment_state  (10,) float32 the target x, y in metres, table frame, and the request one-hot;
                                 (13,) in layout target_tool: and the tool relative to the target
                                 (act_node.observation.ENV_LAYOUTS; the names say which)
  observation.images.<camera>    (H, W, 3)     video
  action                         (6,) float32  joint position targets, same units as the state
and the task text ("pick up the cup") per frame.

The action is what the arm was sent (ACTION_CONTRACT "sent"), as LeRobot records a real arm's: the expert's steps
go through the graph's chunk executor (act_node.stepping.ExecutedAgent: the joint ranges and the velocity bound
the sim node applies, GraphConfig's defaults unless `config` says), which executes and records the command it
sends, so `act-sim record` and the graph's recorder node write the same dataset for the same seeds.
meta/act_node_action.json says so; a dataset without it was recorded before (act-sim record then executed and
recorded the expert's plan unbounded: ACTION_CONTRACTS["planned"]), and is not resumed with the new contract.

Only successful episodes are kept by default: a failed demonstration teaches the failure; a seed whose scene the
expert cannot plan counts as a failure.

An evaluation ends at the success (the object 5 cm up, held), so by default the recording does too. With
`after_success=N` the expert's plan goes on for N more frames (the rest of the 8 cm lift, then the hold)
and the episode is kept only if the object is still up and held at its last frame: without them the lift
is the last few frames of every demonstration, and an ACT chunk taken there is mostly padding.

Nothing recorded is lost. LeRobot's writer keeps two parquet files open while it records (the frames in
data/, the episode index in meta/episodes/) and writes their footers only in `finalize()`; a process that
dies before that leaves files LeRobot cannot read ("Parquet magic bytes not found in footer"), and with
them every episode. So:
  - SIGINT (Ctrl-C) and SIGTERM only ask the recording to stop: it stops at the next simulated step,
    drops the episode in progress (never half of one), and finalizes. A signal that comes while an
    episode is being saved lets that save finish first.
  - any exception (a full disk included) drops the episode in progress, finalizes, and is raised again
    with a note saying what the dataset holds.
  - which seed each saved episode came from goes to meta/act_node_seeds.json (written atomically next
    to LeRobot's own metadata), so `resume=True` continues after the seeds already tried, through
    `LeRobotDataset.resume`, and refuses a run whose cameras, image size, fps, object count or renderer
    differ. meta/act_node_renderer.json says which renderer drew the images (act_node.checkpoints.RENDERER_FILE):
    `act-sim train` copies it into each checkpoint, and renderer "auto" evaluates a checkpoint with it.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_IMAGES, OBS_STATE
from tqdm import tqdm

from act_node import so101
from act_node.checkpoints import dataset_renderer, write_renderer
from act_node.config import GraphConfig
from act_node.encoding import save_episode
from act_node.episodes import EpisodeStopped, run_episode
from act_node.observation import dataset_frame, environment_state_names
from act_node.stepping import ExecutedAgent, chunk_executor
from act_node.stops import StopRequests
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert
from act_node.tabletop.kinematics import Unreachable
from act_node.tabletop.perturb import ActionNoise

ROBOT_TYPE = "so101_sim"
JOINT_FEATURE_NAMES = [f"{name}.pos" for name in so101.JOINT_NAMES]
SEEDS_FILE = Path("meta") / "act_node_seeds.json"  # under the dataset root, beside LeRobot's info.json
ACTION_FILE = Path("meta") / "act_node_action.json"  # which action contract made the dataset
ACTION_CONTRACTS = {
    "sent": "the command sent to the arm each tick, after the joint ranges and the velocity bound (the graph's "
            "act/joint_command; act-sim record through the same executor)",
    "planned": "the expert's planned step, executed and recorded without the velocity bound (act-sim record before "
               "the action contract was written down; the graph's recorder recorded the sent command already)",
}
ACTION_CONTRACT = "sent"  # what this package records


@dataclass(frozen=True)
class CameraShape:
    name: str
    height: int
    width: int


@dataclass(frozen=True)
class DatasetSpec:
    """What a dataset is recorded from, where no env is: the recorder node and bag2dataset (a PickObjectEnv
    answers the same names). `renderer` None: real cameras; `object_count` None: not a table-top scene."""

    cameras: tuple[CameraShape, ...]
    fps: int
    renderer: str | None = None
    object_count: int | None = None
    robot_type: str = ROBOT_TYPE
    environment_state: bool = True  # the target and the request: observation.environment_state
    environment_layout: str = "target"  # which of act_node.observation.ENV_LAYOUTS

    @classmethod
    def of_cameras(cls, sizes: dict[str, tuple[int, int]], fps: int, **fields) -> DatasetSpec:
        return cls(tuple(CameraShape(name, int(h), int(w)) for name, (h, w) in sizes.items()), int(fps), **fields)


def dataset_features(env: PickObjectEnv | DatasetSpec) -> dict:
    """The dataset's features for what records it: state, environment state (unless the spec says none),
    action, a video per camera."""
    features = {OBS_STATE: {"dtype": "float32", "shape": (6,), "names": JOINT_FEATURE_NAMES}}
    if getattr(env, "environment_state", True):
        names = environment_state_names(getattr(env, "environment_layout", "target"))
        features[OBS_ENV_STATE] = {"dtype": "float32", "shape": (len(names),), "names": names}
    features[ACTION] = {"dtype": "float32", "shape": (6,), "names": JOINT_FEATURE_NAMES}
    for camera in env.cameras:
        features[f"{OBS_IMAGES}.{camera.name}"] = {
            "dtype": "video", "shape": (camera.height, camera.width, 3), "names": ["height", "width", "channels"]}
    return features


@dataclass
class RecordSummary:
    root: Path
    recorded: int  # episodes this run saved
    skipped_seeds: list[int]  # seeds not saved: the expert failed, or could not plan the scene
    frames: int  # frames this run saved
    seconds: float
    unplannable_seeds: list[int] = field(default_factory=list)  # of skipped_seeds: no plan for the scene
    total_episodes: int = 0  # in the dataset now, with those of earlier runs (resume)
    total_frames: int = 0
    stopped_by: str | None = None  # "SIGINT" or "SIGTERM" when a signal ended the run early
    dropped_frames: int = 0  # frames of the episode in progress when the run stopped, not saved
    policy_successes: list[int] = field(default_factory=list)  # of skipped_seeds: a takeover's policy succeeded


@dataclass
class SeedRecord:
    """meta/act_node_seeds.json: the seed of each saved episode (by episode index) and where to go on."""

    episode_seeds: list[int | None]  # None: an episode whose seed is unknown (recorded some other way)
    next_seed: int  # the first seed no run has tried yet
    objects: int | None  # None: not a table-top scene (an arm's own demonstrations)
    after_success: int = 0  # frames recorded past the success
    # per saved episode, the --action-noise scale it was recorded with (0: clean; tabletop.perturb.ActionNoise)
    episode_noise: list[float] = field(default_factory=list)
    # per saved episode, None (the expert's own, from reset) or where it took over from a policy (act_lab.takeover):
    # {"policy": checkpoint, "tick": the episode's tick it took over at, "reason": why}
    episode_takeover: list[dict | None] = field(default_factory=list)

    @classmethod
    def read(cls, root: Path) -> SeedRecord | None:
        path = root / SEEDS_FILE
        if not path.is_file():
            return None
        content = json.loads(path.read_text())
        objects = content["objects"]
        seeds = list(content["episode_seeds"])
        noise = [float(value) for value in content.get("episode_noise", [])]
        return cls(seeds, int(content["next_seed"]), None if objects is None else int(objects),
                   int(content.get("after_success", 0)), noise, list(content.get("episode_takeover", [])))

    def __post_init__(self):
        # a file written before the noise (or the takeovers) was recorded, or an episode added some other way:
        # clean, the expert's own
        count = len(self.episode_seeds)
        self.episode_noise = (list(self.episode_noise) + [0.0] * count)[:count]
        self.episode_takeover = (list(self.episode_takeover) + [None] * count)[:count]

    def add(self, seed: int | None, noise: float = 0.0, takeover: dict | None = None) -> None:
        """A saved episode: its seed, action-noise scale and takeover, and where the next run goes on."""
        self.episode_seeds.append(seed)
        self.episode_noise.append(float(noise))
        self.episode_takeover.append(takeover)
        if seed is not None:
            self.next_seed = max(self.next_seed, seed + 1)

    def write(self, root: Path) -> None:
        """Atomically: a reader sees the old file or the new one, never half of one."""
        path = root / SEEDS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps({"episode_seeds": self.episode_seeds, "next_seed": self.next_seed,
                                       "objects": self.objects, "after_success": self.after_success,
                                       "episode_noise": self.episode_noise,
                                       "episode_takeover": self.episode_takeover},
                                      indent=1) + "\n")
        os.replace(partial, path)


class TooFewEpisodes(RuntimeError):
    """Fewer episodes succeeded than asked for within the seeds tried; raised after the dataset was finalized,
    holding those kept. `summary` says what was recorded (a Ray shard uses it: act_node.distributed)."""

    def __init__(self, message: str, summary: RecordSummary):
        super().__init__(message)
        self.summary = summary


class SecondAttempts(Protocol):
    """Where a policy acts first and the expert takes over (act_lab.takeover.Takeover is one): its agent acts, and
    says in `expert_acting` who chose the last action and in `took_over_at` when the expert took over (None: never)."""

    def agent(self, env: PickObjectEnv, expert: ScriptedExpert): ...

    def record_of(self, agent) -> dict | None: ...


class ResumeRefused(ValueError):
    """The dataset at the root cannot be continued by this run; the message says why."""


def record(env: PickObjectEnv, repo_id: str, root: Path, episodes: int, first_seed: int | None = None,
           keep_failures: bool = False, max_attempts: int | None = None, resume: bool = False,
           on_saved: Callable[[int], None] | None = None, after_success: int = 0,
           action_noise: float = 0.0, raw_maps=None, takeover: SecondAttempts | None = None,
           config: GraphConfig | None = None) -> RecordSummary:
    """Record `episodes` expert episodes into a new dataset at `root` (seeds from `first_seed`, default 0),
    or, with `resume`, append them to the dataset there (seeds after those already tried).
    Tries at most `max_attempts` seeds (default 3 * episodes). `on_saved(n)` runs after the n-th episode
    this run saves (bench/bench_record.py measures memory there). `after_success`: frames of the expert's
    plan recorded past the success (the module's docstring says why). `action_noise`: the scale of the smooth
    offsets added to the executed actions (act_node.tabletop.perturb: recoveries; the dataset keeps the expert's
    clean actions, meta/act_node_seeds.json each episode's scale). `raw_maps`: an act_lab.vision.cache.RawMaps
    that gets every frame's raw camera images and keeps each saved episode's backbone maps (the recipe's).
    `takeover`: second attempts (act_lab.takeover): its policy acts from reset and the expert takes over where
    it goes wrong; only the expert's part is recorded, and a seed the policy succeeds on is skipped.
    `config`: the graph settings the actions are executed with (the velocity bound; default: GraphConfig's, the
    graph's), through the sim node's executor; the recorded action is the command it sent."""
    root = Path(root)
    config = config or GraphConfig(policy="expert", fps=env.fps)
    executor = chunk_executor(config, env.table.robot.lower, env.table.robot.upper)
    ActionNoise(action_noise, 0)  # refuses a negative or non-finite scale before anything is written
    if takeover is not None and action_noise:
        raise ValueError("action noise pushes the expert off its own plan from reset; a takeover's expert plans "
                         "again where the policy went wrong: record them in separate runs")
    if after_success < 0:
        raise ValueError(f"after_success must be >= 0 frames, got {after_success}")
    if resume:
        dataset, seeds = resume_dataset(env, repo_id, root, first_seed, after_success)
    else:
        dataset, seeds = create_dataset(env, repo_id, root, 0 if first_seed is None else first_seed,
                                         after_success)
    expert = ScriptedExpert(env)
    agent = expert if takeover is None else takeover.agent(env, expert)
    started = time.perf_counter()
    start_episodes, start_frames = dataset.meta.total_episodes, dataset.meta.total_frames
    first = seeds.next_seed
    attempts = max_attempts if max_attempts is not None else 3 * episodes
    skipped, unplannable, policy_successes, dropped = [], [], [], 0
    seed = first
    progress = tqdm(total=episodes, desc="recording" if takeover is None else "second attempts", unit="episode")
    with StopRequests() as stop:
        try:
            while dataset.meta.total_episodes - start_episodes < episodes and seed < first + attempts:
                outcome = _run_episode(env, agent, dataset, seed, stop, after_success,
                                       ActionNoise(action_noise, seed, lambda: expert.plan) if action_noise else None,
                                       raw_maps, executor)
                if outcome == "stopped":
                    dropped = dataset.writer.episode_buffer["size"]
                    dataset.clear_episode_buffer()
                    if raw_maps is not None:
                        raw_maps.discard()
                    print(f"dropped the episode in progress (seed {seed}, {dropped} frames)", file=sys.stderr)
                    break
                if outcome == "success" or (outcome == "failure" and keep_failures):
                    if raw_maps is not None:  # first: a stop in between leaves a file the next save overwrites
                        raw_maps.save(dataset.meta.total_episodes)
                    save_episode(dataset)
                    seeds.add(seed, action_noise, None if takeover is None else takeover.record_of(agent))
                    progress.update(1)
                    if on_saved is not None:
                        on_saved(dataset.meta.total_episodes - start_episodes)
                else:
                    dataset.clear_episode_buffer()
                    if raw_maps is not None:
                        raw_maps.discard()
                    skipped.append(seed)
                    if outcome == "unplannable":
                        unplannable.append(seed)
                    if outcome == "policy success":
                        policy_successes.append(seed)
                seed += 1
                seeds.next_seed = seed
                seeds.write(root)
                progress.set_postfix(skipped=len(skipped), unplannable=len(unplannable),
                                     **({} if takeover is None else {"policy_successes": len(policy_successes)}))
                if stop.signal_name:
                    break
        except BaseException as error:
            # the dataset is consistent between episodes: bring it back there, keep what was saved
            abandon_episode(dataset, seeds, seed, root, action_noise,
                            None if takeover is None else takeover.record_of(agent))
            error.add_note(f"recording stopped at seed {seed}; the episode in progress was dropped; the "
                           f"dataset at {root} keeps its {dataset.meta.total_episodes} completed episodes "
                           f"({dataset.meta.total_frames} frames)")
            raise
        finally:
            progress.close()
            dataset.finalize()
    recorded = dataset.meta.total_episodes - start_episodes
    summary = RecordSummary(root, recorded, skipped, dataset.meta.total_frames - start_frames,
                            time.perf_counter() - started, unplannable, dataset.meta.total_episodes,
                            dataset.meta.total_frames, stop.signal_name, dropped, policy_successes)
    if recorded < episodes and stop.signal_name is None:
        raise TooFewEpisodes(f"only {recorded} of {episodes} episodes succeeded in {attempts} seeds "
                             f"(failed seeds: {skipped}, of which unplannable: {unplannable}"
                             + (f", the policy's own successes: {policy_successes}" if takeover is not None else "")
                             + f"); "
                             f"the dataset at {root} holds those {recorded}", summary)
    return summary


def _run_episode(env: PickObjectEnv, agent, dataset, seed: int, stop: StopRequests,
                 after_success: int = 0, noise: ActionNoise | None = None, raw_maps=None, executor=None) -> str:
    """One seeded episode into the dataset's episode buffer: "success", "failure", "unplannable" (nothing
    buffered), "policy success" or "not taken over" (a takeover's policy succeeded, or failed without the
    expert taking over: no expert frames, nothing to keep) or "stopped" (a stop was
    requested before the episode ended). With `after_success`, a success goes on for that many frames and
    counts only if the object is still up and held after them. Only the expert's actions are buffered, each as
    the command `executor` (act_node.chunks.ChunkExecutor) sent; noise is added after it, to what the arm does."""
    def add(observation: dict, action) -> None:
        if not getattr(agent, "expert_acting", True):
            return  # a takeover's policy acting: its actions are not demonstrations
        dataset.add_frame(dataset_frame(observation, action, env.task))
        if raw_maps is not None:
            raw_maps.add(observation)

    if raw_maps is not None:
        raw_maps.discard()
    try:
        executed = agent if executor is None else ExecutedAgent(env, agent, executor)
        result = run_episode(env, executed, seed, after_success=after_success, stop=lambda: bool(stop.signal_name),
                             execute=noise, on_step=add)
    except EpisodeStopped:
        return "stopped"
    except Unreachable as error:  # a takeover's expert cannot plan from where the policy left the arm and object
        if not hasattr(agent, "took_over_at"):
            raise
        tqdm.write(f"seed {seed}: skipped, the expert cannot plan its second attempt ({error})")
        return "unplannable"
    if result.unplannable:
        tqdm.write(f"seed {seed}: skipped, the expert cannot plan it ({result.unplannable})")
        return "unplannable"
    if getattr(agent, "took_over_at", 0) is None:  # no expert part: nothing to keep, not even with keep_failures
        return "policy success" if result.success else "not taken over"
    if not result.success:
        return "failure"
    if result.held_after_success is False:
        tqdm.write(f"seed {seed}: dropped, the object was not up and held {after_success} frames after the success")
        return "failure"
    return "success"


def create_dataset(env: PickObjectEnv | DatasetSpec, repo_id: str, root: Path, first_seed: int = 0,
                   after_success: int = 0, image_writer_threads: int = 0):
    """A new, empty dataset at `root` for what `env` records (refused if the folder holds anything), with its
    seed record and its renderer file; (dataset, SeedRecord)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"dataset folder {root} already exists and is not empty: choose another --root, "
                              f"or add --resume to append to it")
    quiet_encoder()
    dataset = LeRobotDataset.create(repo_id=repo_id, fps=env.fps, features=dataset_features(env), root=root,
                                    robot_type=getattr(env, "robot_type", ROBOT_TYPE), use_videos=True,
                                    image_writer_threads=image_writer_threads, video_backend=video_backend())
    seeds = SeedRecord([], first_seed, env.object_count, after_success)
    seeds.write(root)
    write_action_contract(root)
    if env.renderer is not None:  # what drew the images: a checkpoint of it is evaluated with the same
        write_renderer(root / "meta", env.renderer)
    return dataset, seeds


@functools.cache
def video_backend() -> str:
    """LeRobot's video decoder here: "torchcodec" where it loads (it needs FFmpeg's shared libraries), else "pyav".
    Chosen before LeRobot would choose: its own fallback logs torchcodec's loading traceback (some 90 lines, one
    per FFmpeg version tried) before it goes on with PyAV, which works."""
    try:
        importlib.import_module("torchcodec")
    except (ImportError, OSError, RuntimeError):
        return "pyav"
    return "torchcodec"


def quiet_encoder() -> None:
    """SVT-AV1 (LeRobot's video encoder, through PyAV) prints its version, its configuration and two warnings about
    its own settings, some 20 lines a video, to stderr: from here on it says its errors only (a user's SVT_LOG wins);
    and the `datasets` library's "Map" bar for each saved episode goes, the recording's own bar stays."""
    os.environ.setdefault("SVT_LOG", "1")
    from datasets.utils.logging import disable_progress_bar

    disable_progress_bar()


def write_action_contract(root: Path) -> None:
    """meta/act_node_action.json: the dataset's action is ACTION_CONTRACT."""
    path = Path(root) / ACTION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"action": ACTION_CONTRACT, "means": ACTION_CONTRACTS[ACTION_CONTRACT]}, indent=1)
                    + "\n")


def action_contract(root: Path) -> str | None:
    """Which action contract recorded the dataset at `root` (a key of ACTION_CONTRACTS); None: recorded before
    the contract was written down (by act-sim record: "planned"). ValueError for a file that does not read."""
    path = Path(root) / ACTION_FILE
    if not path.is_file():
        return None
    try:
        contract = json.loads(path.read_text())["action"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} does not read as an action contract ({error!r}); expected "
                         f'{{"action": one of {list(ACTION_CONTRACTS)}}}') from None
    if contract not in ACTION_CONTRACTS:
        raise ValueError(f"{path} names action contract {contract!r}; known: {list(ACTION_CONTRACTS)}")
    return contract


def resume_dataset(env: PickObjectEnv | DatasetSpec, repo_id: str, root: Path, first_seed: int | None = None,
                   after_success: int = 0, image_writer_threads: int = 0):
    """LeRobot's own resume, after checking the dataset was recorded like this run would record it."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    if not (root / "meta" / "info.json").is_file():
        raise FileNotFoundError(f"nothing to resume at {root}: no meta/info.json (record without --resume first)")
    try:
        quiet_encoder()
        dataset = LeRobotDataset.resume(repo_id=repo_id, root=root, image_writer_threads=image_writer_threads,
                                        video_backend=video_backend())
    except Exception as error:  # pyarrow's errors have no common base worth naming
        raise ResumeRefused(f"cannot resume {root}: its metadata does not load ({type(error).__name__}: {error}); "
                         f"it was probably written by a recorder that was killed before finalizing") from error
    mismatch = _settings_mismatch(dataset, env)
    try:
        contract = action_contract(root)
    except ValueError as error:
        mismatch.append(str(error))
    else:
        if contract != ACTION_CONTRACT:
            said = contract or "none written (recorded before the contract was: act-sim record's was 'planned')"
            mismatch.append(f"action: recorded {said}, this run {ACTION_CONTRACT!r} "
                            f"({ACTION_CONTRACTS[ACTION_CONTRACT]})")
    seeds = SeedRecord.read(root)
    if seeds is not None and env.object_count is not None and seeds.objects != env.object_count:
        mismatch.append(f"objects: recorded {seeds.objects}, this run {env.object_count}")
    if seeds is not None and seeds.after_success != after_success:
        mismatch.append(f"frames after the success: recorded {seeds.after_success}, this run {after_success}")
    if mismatch:
        dataset.finalize()
        raise ResumeRefused(f"cannot resume {root} with different settings: {'; '.join(mismatch)}")
    total = dataset.meta.total_episodes
    if seeds is None or len(seeds.episode_seeds) != total:
        if first_seed is None and total > 0:
            dataset.finalize()
            listed = "no" if seeds is None else len(seeds.episode_seeds)
            raise ResumeRefused(f"cannot tell which seeds {root} was recorded with: it holds {total} episodes and "
                                f"{root / SEEDS_FILE} lists {listed}; pass --first-seed to say where to go on")
        known = (seeds.episode_seeds if seeds is not None else [])[:total]
        seeds = SeedRecord(known + [None] * (total - len(known)), first_seed or 0, env.object_count, after_success)
    elif first_seed is not None:
        if first_seed < seeds.next_seed:
            dataset.finalize()
            raise ResumeRefused(f"--first-seed {first_seed} would record seeds {root} has already tried "
                                f"(up to {seeds.next_seed - 1}); leave it out to go on from {seeds.next_seed}")
        seeds.next_seed = first_seed
    tqdm.write(f"resuming {root}: {dataset.meta.total_episodes} episodes, next seed {seeds.next_seed}")
    return dataset, seeds


def _settings_mismatch(dataset, env: PickObjectEnv | DatasetSpec) -> list[str]:
    """What differs between the dataset's cameras, image sizes and fps and this env's."""
    def cameras(features: dict) -> dict[str, tuple]:
        return {key.removeprefix(f"{OBS_IMAGES}."): tuple(value["shape"]) for key, value in features.items()
                if key.startswith(f"{OBS_IMAGES}.")}

    def described(shapes: dict[str, tuple]) -> str:
        return ", ".join(f"{name} {shape[0]}x{shape[1]}" for name, shape in sorted(shapes.items())) or "none"

    recorded, wanted = cameras(dataset.meta.features), cameras(dataset_features(env))
    mismatch = []
    state_names = [features.get(OBS_ENV_STATE, {}).get("names") for features in (dataset.meta.features,
                                                                                  dataset_features(env))]
    if state_names[0] != state_names[1]:
        said = [f"{len(names)} ({', '.join(names)})" if names else "none" for names in state_names]
        mismatch.append(f"{OBS_ENV_STATE}: recorded {said[0]}, this run {said[1]}")
    if recorded != wanted:
        mismatch.append(f"cameras (height x width): recorded {described(recorded)}, this run {described(wanted)}")
    if dataset.meta.fps != env.fps:
        mismatch.append(f"fps: recorded {dataset.meta.fps}, this run {env.fps}")
    if recorded and env.renderer is not None:  # real cameras, or no images: nothing to compare the lighting of
        try:
            drawn = dataset_renderer(dataset.root)
        except ValueError as error:  # its renderer file does not read: nothing to compare with
            mismatch.append(f"renderer: {error}")
        else:
            if drawn != env.renderer:
                mismatch.append(f"renderer: recorded {drawn}, this run {env.renderer} (the images would light the "
                                f"scene differently; pass --renderer {drawn})")
    for key, feature in dataset_features(env).items():
        if key in dataset.meta.features and not key.startswith(f"{OBS_IMAGES}."):
            if tuple(dataset.meta.features[key]["shape"]) != feature["shape"]:
                mismatch.append(f"{key}: recorded shape {tuple(dataset.meta.features[key]['shape'])}, "
                                f"this run {feature['shape']}")
    return mismatch


def abandon_episode(dataset, seeds: SeedRecord, seed: int | None, root: Path, noise: float = 0.0,
                    takeover: dict | None = None) -> None:
    """After an exception: drop the episode in progress (its staged frames free the disk a full disk
    needs to finish), finalize, and make the files agree with the episodes LeRobot's metadata lists."""
    from lerobot.datasets.io_utils import write_info

    saved = dataset.meta.total_episodes
    if len(seeds.episode_seeds) < saved:  # the exception came after LeRobot had saved the episode
        seeds.add(seed, noise, takeover)
    dataset.clear_episode_buffer()
    dataset.finalize()
    write_info(dataset.meta.info, root)  # a write cut short by a full disk may have left it truncated
    _drop_unlisted_frames(root, dataset.meta.total_frames)
    seeds.write(root)


def _drop_unlisted_frames(root: Path, total_frames: int) -> None:
    """An episode whose save failed after its frames reached the data parquet but before the metadata
    listed it leaves rows with index >= total_frames: rewrite that file without them."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    for path in sorted((root / "data").rglob("*.parquet")):
        table = pq.read_table(path)
        keep = pc.less(table["index"], total_frames)
        if pc.all(keep).as_py():
            continue
        partial = path.with_suffix(".parquet.partial")
        pq.write_table(table.filter(keep), partial, compression="snappy")
        os.replace(partial, path)
