"""`act-lab recipe --out DIR`: an ACT from an empty folder, every stage resumable. Two kinds:

    act-lab recipe --out outputs/recipe            # the camera ACT; run it again after a stop: it goes on
    act-lab recipe --out outputs/recipe --encoder models/tabletop_encoder   # the shipped encoder: no stage 1
    act-lab recipe --kind yaw --out outputs/yaw    # the shipped default's recipe (models/act_target_tool_yaw_dart)

--kind yaw makes what `policy:=act` runs: ACT without image tokens on the joints and environment_state's
target_tool_yaw_grasp layout (the requested object's yaw read from the front and wrist cameras by models/yaw_reader,
whose backbone is models/tabletop_encoder, and the grasp the expert's planner chooses: act_node.grasp;
--environment-layout target_tool_yaw: the yaw without the grasp), 360 clean demonstrations and 240 pushed off the
plan (DART), ACT at width 128 (feed-forward 512) under bfloat16 autocast, 30,000 steps at batch 64, the mean of the
last 3 checkpoints, run with ACT's temporal ensembling (0.01). Its stages are record, act, curve and eval (no
encoder, no maps to cache). On a lent GPU: --device cuda.

--kind cameras (the default) trains the camera ACT at the same scale, with the front and wrist images through the
frozen backbone and environment_state's target_tool layout (the tool relative to the target, no yaw: the images
are to show it); KIND_DEFAULTS says where its numbers come from.

Stages, each a command of its own (printed before it runs, so any one can be run by hand), each skipped when
its result is there and continued when it is half done:
  encoder   DIR/encoder    python -m act_lab.vision.encoder: ACT's ResNet-18 pretrained on the simulator's labels
                           (skipped with --encoder: that folder's backbone.safetensors is used)
  record    DIR/data       act-sim record: expert demonstrations with the front and wrist cameras at 96x128,
            DIR/raw_maps   --episodes clean, then --recovery-episodes pushed off the plan on the way to the
                           object (--action-noise: recoveries), then --more-episodes clean ones again (default 0:
                           240 more measured no gain), continued with --resume until it holds them all;
                           --raw-maps: the frozen backbone's maps of the raw renders, the frames the policy sees
                           at run time (the videos are lossy: act_lab.vision.cache says by how much)
  cache     DIR/cache      python -m act_lab.vision.cache: every frame's layer4 maps in dataset order
  act       DIR/act        python -m act_lab.vision.act_train: LeRobot ACT on the cached maps, a checkpoint every
                           --save-every steps (DIR/act/checkpoints/NNNNNN/pretrained_model), and the mean of the
                           last 3 (DIR/act/average/pretrained_model: on the image-less run of the first run's data,
                           37/100 against 19/100 for the last alone)
  curve     DIR/curve      act-lab curve: the checkpoints on unseen seeds (curve.json, curve.png)
  eval      DIR/eval       act-sim eval of the average on the cards' 200 unseen 4-object seeds (2000-2199):
                           report.json, success with its 95% interval, by kind
DIR/recipe.json keeps each stage's wall time (summed over the runs that worked on it, written every minute while
one runs, so a run killed outright keeps it) and its command. A stop (Ctrl-C, which reaches the running stage
from the terminal, or SIGTERM, passed on to it) is waited for: act-sim record finalizes its dataset, act_train
keeps its last state.pt. One recipe at a time a folder (DIR/recipe.lock).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from act_node.chunks import checked_ensemble_coeff
from act_node.table_frame import environment_layout

STAGES = ("encoder", "record", "cache", "act", "curve", "eval")
KIND_STAGES = {"cameras": STAGES, "yaw": ("record", "act", "curve", "eval")}
HEARTBEAT_S = 60.0  # how often a running stage's seconds are written to recipe.json (a killed run keeps them)
AVERAGE_LAST = 3  # the act stage also writes act/average: its last 3 checkpoints' mean (measured: see act_train)
RECORD_SEED = 10_000  # the recordings' seeds (the encoder's frames and the evaluations use others)
CURVE_SEED = 1_000
EVAL_SEED = 2_000  # the cards' seeds: 2000-2199, 4 objects
EVAL_OBJECTS = 4
# environment_state's layouts each kind may record (act-sim record --environment-state)
KIND_LAYOUTS = {"cameras": ("target_tool", "target"), "yaw": ("target_tool_yaw_grasp", "target_tool_yaw")}
# the numbers each kind starts from (the CLI's defaults); the yaw kind's are models/act_target_tool_yaw_dart's
KIND_DEFAULTS = {
    # The image-less ACT's measured scale (results/act_scale: 40,000 steps at batch 64 on 360 clean demonstrations,
    # 13 numbers, the mean of the last 3, ensembled; the CPU's 20,000 x 8 scored 145/300 where this scored 158-167)
    # with the images added: a cached camera step at batch 64 costs 1.2x an image-less one here, so about 5.7 h on
    # 2 CPU cores. The camera recipe's first run (results/act_cameras: 18/100) was 240 clean + 120 pushed,
    # 30,000 x 8, 10 numbers, chunks of 30: the RecipeSettings defaults below, which an older folder's
    # recipe.json is read with.
    # map_dropout 0.5: at 10,000 steps it took this recipe's camera ACT from 6 to 24 of 50 unseen scenes, the same
    # data and seed (results/act_cameras, "Dropout on the image maps")
    "cameras": {"episodes": 360, "recovery_episodes": 0, "steps": 40_000, "save_every": 1_000, "batch_size": 64,
                "curve_every": 10, "ensemble_coeff": 0.01, "environment_layout": "target_tool", "map_dropout": 0.5},
    # models/act_target_tool_yaw (width 256, float32, 40,000 x 64 on a lent H200) made again at half the width under
    # bf16 autocast: 2.83x the steps a second on these cores, and it picked more on the same seeds (results/act_small);
    # then 240 demonstrations pushed off the plan (DART) after the 360 clean ones, 30,000 steps: more again on the
    # same seeds (results/act_dart)
    # then the grasp the expert chose as four more numbers (target_tool_yaw_grasp): results/act_grasp_choice
    "yaw": {"episodes": 360, "recovery_episodes": 240, "steps": 30_000, "save_every": 1_000, "batch_size": 64,
            "curve_every": 10, "ensemble_coeff": 0.01, "environment_layout": "target_tool_yaw_grasp",
            "dim_model": 128, "dim_feedforward": 512, "bf16": True},
}


def run_stage_command(command: list[str], env: dict, note_time, heartbeat_s: float | None = None) -> tuple[int, int]:
    """Run one stage's command to its end: (its exit code, the signal that stopped the recipe or 0).

    `note_time` is called every `heartbeat_s` and once at the end, so a run killed outright (a session's end)
    still leaves the stage's wall time in recipe.json; a heartbeat that cannot write (a full disk) says so and
    the stage goes on. A stop is waited for, never cut short: SIGTERM is passed on to the command, which stops
    its own way (act-sim record finalizes its dataset; act_train keeps its last state.pt). Ctrl-C in a terminal
    reaches the command already (one process group), so SIGINT is passed on only when the recipe is not the
    terminal's foreground (a `kill -INT` of the recipe alone). Should the recipe fail while the command runs, the
    command is stopped and waited for: it does not run on, orphaned."""
    heartbeat_s = HEARTBEAT_S if heartbeat_s is None else heartbeat_s
    signalled: list[int] = []
    running: list[subprocess.Popen] = []

    def pass_on(signum, frame):
        signalled.append(signum)
        if running and running[0].poll() is None and (signum != signal.SIGINT or not in_foreground()):
            running[0].send_signal(signum)

    handlers = {}
    if threading.current_thread() is threading.main_thread():  # installed first: no stop between start and here
        handlers = {s: signal.signal(s, pass_on) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        running.append(subprocess.Popen(command, env=env))
        heartbeat_failed = False
        while True:
            try:
                returncode = running[0].wait(timeout=heartbeat_s)
                break
            except subprocess.TimeoutExpired:
                try:
                    note_time()
                except OSError as error:
                    if not heartbeat_failed:
                        print(f"act-lab recipe: cannot write the stage's time ({error}); the stage goes on",
                              file=sys.stderr, flush=True)
                    heartbeat_failed = True
    finally:
        if running and running[0].poll() is None:  # the recipe failed, not the command: stop it, and wait
            running[0].terminate()
            running[0].wait()
        for s, handler in handlers.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
    note_time()
    return returncode, (signalled[0] if signalled else 0)


def in_foreground() -> bool:
    """Whether this process's group is its terminal's foreground group (a Ctrl-C there reaches the whole group)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):  # no terminal (a pipe, nohup, a test)
        return False


@dataclass(frozen=True)
class RecipeSettings:
    episodes: int = 240  # clean expert demonstrations
    recovery_episodes: int = 120  # then these, pushed off the plan (act-lab record --action-noise)
    # then these clean ones, after the pushed ones (recorded last, they leave the first 360 episodes and their
    # seeds as they were). 0 by default: success grew from 120 to 240 clean demonstrations (21.7% -> 32.3% on 300
    # seeds) but 240 more on top of the 360 brought nothing measurable (112/300 against 116/300 without images;
    # results/act_image_less_avg/data_curve.png)
    more_episodes: int = 0
    action_noise: float = 1.0
    steps: int = 30_000
    save_every: int = 2_500
    curve_every: int = 2  # every 2nd checkpoint (and the last) on the curve
    curve_episodes: int = 50
    threads: int = 2
    environment_state: bool = True
    encoder: str = ""  # a folder holding backbone.safetensors (models/tabletop_encoder); "": train DIR/encoder
    kind: str = "cameras"  # or "yaw": KIND_STAGES, KIND_DEFAULTS
    batch_size: int = 8
    ensemble_coeff: float | None = None  # the checkpoints' temporal_ensemble_coeff (n_action_steps 1); None: chunks
    device: str = "cpu"  # where the ACT stage trains (cuda on a lent GPU)
    eval_episodes: int = 200
    environment_layout: str = "target"  # act-sim record --environment-state: KIND_LAYOUTS
    map_dropout: float = 0.0  # act_train --map-dropout (the camera kind's: KIND_DEFAULTS); 0 in older folders
    dim_model: int = 0  # act_train --dim-model (0: ACT's recipe width, 256)
    dim_feedforward: int = 0  # act_train --dim-feedforward (0: 1024)
    bf16: bool = False  # act_train --bf16

    def __post_init__(self):
        if self.kind not in KIND_STAGES:
            raise ValueError(f"unknown recipe kind {self.kind!r}; the kinds are {', '.join(KIND_STAGES)}")
        if self.kind == "yaw" and not self.environment_state:
            raise ValueError("--no-environment-state: the yaw recipe's ACT takes no image, so environment_state (the "
                             "target, the request, the tool, the yaw) is all it knows of the table; without it "
                             "there is no object to pick. The target's worth is the camera recipe's ablation "
                             "(--kind cameras --no-environment-state)")
        if self.environment_layout not in KIND_LAYOUTS[self.kind]:
            raise ValueError(f"--environment-layout {self.environment_layout}: the {self.kind} recipe records "
                             f"{' or '.join(KIND_LAYOUTS[self.kind])}"
                             + (" (its ACT takes no image: the yaw is how it sees the object)" if self.kind == "yaw"
                                else " (the yaw is what the images are to show)"))
        if self.ensemble_coeff is not None:
            checked_ensemble_coeff(self.ensemble_coeff)
        if self.kind == "yaw" and self.encoder:
            raise ValueError("--encoder is the camera recipe's: the yaw recipe's reader, models/yaw_reader, names "
                             "its own backbone")
        if not (math.isfinite(self.map_dropout) and 0.0 <= self.map_dropout < 1.0):
            raise ValueError(f"--map-dropout must be in [0, 1), got {self.map_dropout}")
        if self.kind == "yaw" and self.map_dropout:
            raise ValueError("--map-dropout drops the camera ACT's image maps: the yaw recipe's ACT takes no image")
        for name in ("dim_model", "dim_feedforward"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be > 0 (or 0: the recipe's)")
        for name in ("steps", "batch_size", "save_every", "curve_every", "curve_episodes", "eval_episodes", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be at least 1")

    @classmethod
    def of_kind(cls, kind: str, **given) -> RecipeSettings:
        """The kind's numbers (KIND_DEFAULTS), with what is given (not None) over them."""
        # an unknown kind has no defaults here; __post_init__ refuses it, naming the kinds
        return cls(kind=kind, **{**KIND_DEFAULTS.get(kind, {}), **{k: v for k, v in given.items() if v is not None}})


class Recipe:
    def __init__(self, out: Path, settings: RecipeSettings, python: str = sys.executable):
        self.out, self.settings, self.python = Path(out), settings, python
        self.state_path = self.out / "recipe.json"

    # where each stage writes
    @property
    def data(self) -> Path:
        return self.out / "data"

    @property
    def backbone(self) -> Path:
        folder = Path(self.settings.encoder) if self.settings.encoder else self.out / "encoder"
        return folder / "backbone.safetensors"

    @property
    def raw_maps(self) -> Path:
        return self.out / "raw_maps"

    @property
    def stages(self) -> tuple[str, ...]:
        return KIND_STAGES[self.settings.kind]

    @property
    def average(self) -> Path:
        return self.act_dir / "average" / "pretrained_model"

    @property
    def act_dir(self) -> Path:
        return self.out / ("act" if self.settings.environment_state else "act_no_target")

    def _state(self) -> dict:
        if self.state_path.is_file():
            return json.loads(self.state_path.read_text())
        return {"settings": asdict(self.settings), "stages": {}}

    def _note_time(self, state: dict, record: dict, before: float, started: float) -> None:
        """The stage's seconds so far (those of earlier runs, `before`, and this one's), kept in recipe.json."""
        record["seconds"] = round(before + time.monotonic() - started, 1)
        self._write_state(state)

    def _write_state(self, state: dict) -> None:
        temporary = self.state_path.with_name(self.state_path.name + ".partial")
        temporary.write_text(json.dumps(state, indent=1) + "\n")
        os.replace(temporary, self.state_path)

    def recorded_episodes(self) -> int:
        info = self.data / "meta" / "info.json"
        return int(json.loads(info.read_text())["total_episodes"]) if info.is_file() else 0

    def command(self, stage: str) -> list[str] | None:
        """The stage's command, or None when its result is there."""
        s = self.settings
        act_sim = [self.python, "-m", "act_node.cli"]  # the user's eval
        lab = [self.python, "-m", "act_lab.cli"]  # record with raw maps and pushes, the curve
        if stage == "record":  # three runs into one dataset: clean episodes, the pushed ones, more clean ones
            have = self.recorded_episodes()
            self.check_data_layout()
            if have >= s.episodes + s.recovery_episodes + s.more_episodes:
                return None
            if s.kind == "yaw":  # the reader draws its own 96x128 front and wrist images; ACT takes none
                common = ["record", "--cameras", "wrist", "--height", "24", "--width", "32", "--environment-state",
                          s.environment_layout, "--after-success-s", "1", "--root", str(self.data), "--repo-id",
                          "local/act_pick_yaw"]
            else:
                common = ["record", "--cameras", "front,wrist", "--height", "96", "--width", "128",
                          "--environment-state", s.environment_layout, "--after-success-s", "1", "--root",
                          str(self.data), "--repo-id", "local/act_pick_cam", "--raw-maps", str(self.raw_maps),
                          "--backbone", str(self.backbone)]
            if not (self.data / "meta" / "info.json").is_file():
                return [*lab, *common, "--episodes", str(s.episodes), "--first-seed", str(RECORD_SEED)]
            if have < s.episodes:
                return [*lab, *common, "--resume", "--episodes", str(s.episodes - have)]
            if have < s.episodes + s.recovery_episodes:
                return [*lab, *common, "--resume", "--episodes", str(s.episodes + s.recovery_episodes - have),
                        "--action-noise", str(s.action_noise)]
            return [*lab, *common, "--resume", "--episodes",
                    str(s.episodes + s.recovery_episodes + s.more_episodes - have)]
        if stage == "encoder":
            if self.backbone.is_file() and self.backbone.with_suffix(".json").is_file():
                return None
            if s.encoder:
                raise FileNotFoundError(f"--encoder {s.encoder}: no backbone.safetensors and backbone.json there")
            return [self.python, "-m", "act_lab.vision.encoder", "--out", str(self.out / "encoder")]
        if stage == "cache":
            if self.cache_state() == "done":
                return None
            command = [self.python, "-m", "act_lab.vision.cache", "--dataset", str(self.data), "--backbone",
                       str(self.backbone), "--out", str(self.out / "cache")]
            # a folder recorded before --raw-maps existed has none: its maps come from the videos
            return [*command, "--raw-maps", str(self.raw_maps)] if (self.raw_maps / "maps.json").is_file() else command
        if stage == "act":
            self.check_data_layout()
            self.check_act_data()
            if (self.act_dir / "checkpoints" / f"{s.steps:06d}" / "pretrained_model" / "config.json").is_file() \
                    and (self.average / "config.json").is_file():
                return None
            command = [self.python, "-m", "act_lab.vision.act_train", "--dataset", str(self.data)]
            if s.kind == "yaw":
                command += ["--no-cameras"]
            else:
                command += ["--cache", str(self.out / "cache"), "--backbone", str(self.backbone)]
            command += ["--out", str(self.act_dir), "--steps", str(s.steps), "--batch-size", str(s.batch_size),
                        "--save-every", str(s.save_every), "--average-last", str(AVERAGE_LAST)]
            if s.ensemble_coeff is not None:
                command += ["--temporal-ensemble-coeff", str(s.ensemble_coeff)]
            if s.map_dropout:
                command += ["--map-dropout", str(s.map_dropout)]
            if s.dim_model:
                command += ["--dim-model", str(s.dim_model)]
            if s.dim_feedforward:
                command += ["--dim-feedforward", str(s.dim_feedforward)]
            if s.bf16:
                command += ["--bf16"]
            if s.device != "cpu":
                command += ["--device", s.device]
            return command if s.environment_state else [*command, "--no-environment-state"]
        if stage == "curve":
            label = s.kind + ("" if s.environment_state else "_no_target")
            curve = self.out / "curve" / "curve.json"
            if curve.is_file():
                done = json.loads(curve.read_text()).get("runs", {}).get(label, [])
                if any(point.get("step") == s.steps for point in done):
                    return None
            return [*lab, "curve", f"{label}={self.act_dir}", "--every", str(s.curve_every), "--episodes",
                    str(s.curve_episodes), "--first-seed", str(CURVE_SEED), "--workers", str(s.threads),
                    "--out", str(self.out / "curve")]
        if stage == "eval":
            if self.eval_state() == "done":
                return None
            return [*act_sim, "eval", "--policy.path", str(self.average.resolve()), "--episodes", str(s.eval_episodes),
                    "--first-seed", str(EVAL_SEED), "--objects", str(EVAL_OBJECTS), "--workers", str(s.threads),
                    "--videos", "0", "--resume", "--out", str(self.eval_dir)]
        raise ValueError(f"unknown stage {stage!r}; the {s.kind} recipe's stages are {', '.join(self.stages)}")

    @property
    def eval_dir(self) -> Path:
        return self.out / ("eval" if self.settings.environment_state else "eval_no_target")

    def eval_state(self) -> str:
        """done (a report of the average as it is now, on the settings' episodes), stale (of an earlier average,
        or of other episodes), or missing."""
        report = self.eval_dir / "report.json"
        if not report.is_file():
            return "missing"
        there = json.loads(report.read_text())
        weights = self.average / "model.safetensors"
        if there.get("episodes") != self.settings.eval_episodes \
                or Path(there.get("policy", "")).resolve() != self.average.resolve() \
                or not weights.is_file() or weights.stat().st_mtime > report.stat().st_mtime:
            return "stale"
        return "done"

    def check_data_layout(self) -> None:
        """SystemExit when DIR/data holds another environment_state layout than the settings name: a finished
        record stage would otherwise hand the act stage data of the other layout without a word (act-sim record
        --resume refuses it already)."""
        info = self.data / "meta" / "info.json"
        if not info.is_file():
            return
        feature = json.loads(info.read_text()).get("features", {}).get("observation.environment_state")
        if feature is None:
            raise SystemExit(f"act-lab recipe: {self.data} holds no observation.environment_state; these settings "
                             f"record {self.settings.environment_layout}: give another --out")
        there = environment_layout(int(feature["shape"][0]))
        for kind, layouts in KIND_LAYOUTS.items():
            if kind != self.settings.kind and there in layouts and there not in KIND_LAYOUTS[self.settings.kind]:
                raise SystemExit(f"act-lab recipe: {self.data} holds environment_state layout {there}, the {kind} "
                                 f"recipe's data: --kind {kind}, or another --out")
        if there != self.settings.environment_layout:
            raise SystemExit(f"act-lab recipe: {self.data} holds environment_state layout {there}; these settings "
                             f"record {self.settings.environment_layout}: give --environment-layout {there}, or "
                             "another --out")

    def check_act_data(self) -> None:
        """SystemExit when the ACT run in act_dir was trained on fewer (or other) episodes than the dataset holds
        now: recording on into a folder whose ACT stage has run would otherwise count that stage as done, or
        resume it on other data."""
        pinned, info = self.act_dir / "run.json", self.data / "meta" / "info.json"
        if not (pinned.is_file() and info.is_file()):
            return
        trained = json.loads(pinned.read_text()).get("dataset_size")  # None: pinned before the size was
        now = json.loads(info.read_text())
        now = {"episodes": now.get("total_episodes"), "frames": now.get("total_frames")}
        if trained is not None and trained != now:
            raise SystemExit(f"act-lab recipe: the ACT run in {self.act_dir} was trained on {trained['episodes']} "
                             f"episodes ({trained['frames']} frames); {self.data} holds {now['episodes']} "
                             f"({now['frames']}) now: move {self.act_dir} aside to train on them")

    def cache_state(self) -> str:
        """done (complete, of the dataset as it is now), stale (of fewer episodes: recorded on since), or missing."""
        described = self.out / "cache" / "cache.json"
        if not described.is_file():
            return "missing"
        there = json.loads(described.read_text())
        info = self.data / "meta" / "info.json"
        if there.get("complete") and info.is_file() and "dataset" in there:
            now = json.loads(info.read_text())
            if (there["dataset"].get("frames"), there["dataset"].get("episodes")) != (now.get("total_frames"),
                                                                                    now.get("total_episodes")):
                return "stale"
        return "done" if there.get("complete") else "missing"

    def run(self, only: list[str] | None = None) -> dict:
        """The stages (all of the kind's, or `only` these), each skipped when done; one recipe at a time a folder."""
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.out / "recipe.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SystemExit(f"act-lab recipe: another act-lab recipe is running in {self.out}; one at a time "
                                 "a folder (both would train and write there)") from None
            return self._run(only)

    def _run(self, only: list[str] | None) -> dict:
        state = self._state()
        there = state["settings"].get("kind", "cameras")  # a folder from before the kinds: the camera recipe
        if there != self.settings.kind and state["stages"]:
            raise SystemExit(f"act-lab recipe: {self.out} holds the {there} recipe's stages; the {self.settings.kind} "
                             "recipe goes in another --out")
        self.check_data_layout()  # before recipe.json is touched: a refused run leaves it as it was
        # a setting added since that folder's last run was its default then (the yaw kind always recorded its one
        # layout; a camera folder from before the setting, target)
        then = {**asdict(RecipeSettings()), **({"environment_layout": "target_tool_yaw"} if there == "yaw" else {})}
        state["settings"] = {**then, **state["settings"]}
        if state["settings"] != asdict(self.settings) and any(state["stages"].values()):
            changed = {k: (state["settings"].get(k), v) for k, v in asdict(self.settings).items()
                       if state["settings"].get(k) != v}
            print(f"note: settings changed since this folder's last run (there, now): {changed}", flush=True)
            state["settings"] = asdict(self.settings)
        env = {**os.environ, "OMP_NUM_THREADS": str(self.settings.threads), "HF_HUB_OFFLINE": "1",
               "HF_DATASETS_OFFLINE": "1"}
        for name in only or ():
            if name not in self.stages:
                raise ValueError(f"stage {name!r} is not one of the {self.settings.kind} recipe's: "
                                 f"{', '.join(self.stages)}")
        for stage in self.stages:
            if only and stage not in only:
                continue
            command = self.command(stage)
            record = state["stages"].setdefault(stage, {"seconds": 0.0, "done": False})
            if command is None:
                record["done"] = True
                print(f"[{stage}] done already", flush=True)
                self._write_state(state)
                continue
            if stage == "cache" and self.cache_state() == "stale":  # maps of fewer episodes than recorded now
                print(f"[cache] {self.out / 'cache'} holds the maps of an earlier, smaller dataset: computing them "
                      "again", flush=True)
                shutil.rmtree(self.out / "cache")
            # a stage may take more than one command (record: the clean episodes, the pushed ones, more clean)
            while command is not None:
                print(f"[{stage}] running: {' '.join(command)}", flush=True)
                record["command"] = " ".join(command)
                note_time = partial(self._note_time, state, record, record["seconds"], time.monotonic())
                returncode, signalled = run_stage_command(command, env, note_time)
                if signalled:
                    name = signal.Signals(signalled).name
                    print(f"act-lab recipe: {name}: stage {stage} stopped (its command ended, exit {returncode}); "
                          "the same command goes on from there", file=sys.stderr, flush=True)
                    raise SystemExit(128 + signalled)
                if returncode != 0:
                    raise SystemExit(f"act-lab recipe: stage {stage} stopped (exit {returncode}); what it "
                                     "printed says why; once that is fixed (a stop or a crash needs nothing), the "
                                     "same command goes on from there")
                following = self.command(stage)
                if following == command:
                    raise SystemExit(f"act-lab recipe: stage {stage} ended (exit 0) without its result: "
                                     f"{' '.join(command)}")
                command = following
            record["done"] = True
            self._write_state(state)
        return state
