"""One validated configuration of the graph and its facts, each defined once.

`GraphConfig` is what a user chooses (launch arguments, `act-sim eval` flags, the LeRobot env plugin's
fields): it checks itself when made, and produces everything downstream from the same values:

    GraphConfig.launch_arguments()      name -> (default text, description): sim.launch.py and act-sim launch
    GraphConfig.from_arguments({...})   launch-argument strings -> a checked config
    config.env_kwargs()                 PickObjectEnv's keyword arguments (in-process eval, the LeRobot plugin)
    config.sim_parameters(), ...        each node's ROS parameters (act_node.nodes.graph)

Defaults, and why:
- 30 fps: LeRobot's SO-101 recording rate; the sim steps physics at 240 Hz, 8 substeps a tick.
- chunk 100, re-plan every 30 ticks: ACT's chunk; once a second at 30 fps (the grasp takes about 4 s).
- episodes of 300 ticks (10 s): the expert needs about 5 s.
- velocity bound: the STS3215's no-load speed (act_node.so101).
- images: 240x320 for the sim's own views and videos, 96x128 for training and the graph's default policy
  (the shipped checkpoint's size: models/act_pick/README.md).
- renderer auto: the faster for the image size (bench/bench_render.py): TinyRenderer at the 96x128 default (EGL
  costs about 10 ms a frame at any size on these CPUs), pybullet's EGL plugin from 32,000 pixels a frame where it
  loads (2.1x as fast at 240x320, 4.4x at 480x640); a checkpoint that takes images gets the renderer its dataset
  was recorded with (`checkpoint_renderer`): the two light the scene differently.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from act_node import so101
from act_node.tabletop.cameras import CAMERAS, RENDER_CHOICES, RENDERERS

FPS = 30
CHUNK_SIZE = 100
REPLAN_EVERY = 30  # ACT's n_action_steps and the expert's cadence
EPISODE_STEPS = 300
DEFAULT_CAMERAS = ("front", "wrist")
SIM_IMAGE_SIZE = (240, 320)
TRAIN_IMAGE_SIZE = (96, 128)
POLICIES = ("act", "expert")
SHIPPED_MODEL = "act_pick"  # models/act_pick: the trained ACT, policy:=act's default checkpoint
CLOCKS = ("lockstep", "realtime")
MERGE_RULES = ("replace", "average", "ensemble")
TARGET_SOURCES = ("selector", "truth")


def _argument(default, description: str, **limits):
    return field(default=default, metadata={"description": description, **limits})


@dataclass(frozen=True)
class GraphConfig:
    policy: str = _argument("act", "act (a checkpoint: the shipped models/act_pick unless checkpoint:= says) or "
                                   "expert (the scripted expert)", choices=POLICIES)
    checkpoint: str = _argument("", f"LeRobot pretrained_model folder (policy:=act; empty: the shipped "
                                    f"models/{SHIPPED_MODEL})")
    clock: str = _argument("lockstep", "lockstep (the sim waits for the policy) or realtime", choices=CLOCKS)
    cameras: tuple[str, ...] = _argument(DEFAULT_CAMERAS, f"comma-separated cameras: {', '.join(CAMERAS)}")
    image_height: int = _argument(TRAIN_IMAGE_SIZE[0], "camera image height (pixels)", low=8, high=2160)
    image_width: int = _argument(TRAIN_IMAGE_SIZE[1], "camera image width (pixels)", low=8, high=3840)
    objects: int = _argument(4, "objects on the table", low=1, high=8)
    renderer: str = _argument("auto", "the sim's camera renderer: auto (a camera checkpoint's own; else the faster "
                              "for the image size: tiny below 32,000 pixels a frame, egl from there where it loads), "
                              "egl (pybullet's EGL plugin: 2.1x as fast as tiny at 240x320, 4.4x at 480x640, 0.45x "
                              "at 96x128 on these CPUs; needs libEGL) or tiny (TinyRenderer: needs nothing)",
                              choices=RENDER_CHOICES)
    episodes: int = _argument(1, "episodes before the sim stops (0: serve requests forever)", low=0)
    first_seed: int = _argument(0, "seed of the first episode", low=0)
    replan_every: int = _argument(0, f"ticks between chunks (0: the checkpoint's n_action_steps, {REPLAN_EVERY} for "
                                     "the expert)", low=0)
    camera_every: int = _argument(0, "ticks between camera images from the sim: 0 renders only what is consumed "
                                  "(lockstep: the re-plan ticks the policy answers; realtime: after each chunk, when "
                                  "the policy is free, and after a second without one), 1 every "
                                  "tick (for RViz's image display or a recorder); a video films every tick anyway",
                                  low=0)
    merge: str = _argument("replace", "chunk merge rule: replace, average, ensemble", choices=MERGE_RULES)
    max_velocity: float = _argument(so101.MAX_VELOCITY_RAD_S, "joint velocity bound in rad/s applied by the sim's "
                                    "executor (the STS3215's no-load speed)", low=0.0)
    max_steps: int = _argument(EPISODE_STEPS, "steps before an episode is cut off", low=1)
    lockstep_timeout_s: float = _argument(10.0, "lockstep: seconds of wall time without an action before the sim "
                                          "holds for a tick (an evaluation waits longer)", low=0.0)
    target_source: str = _argument("selector", "where the target comes from: selector (the selector node) or "
                                   "truth (the sim's scene)", choices=TARGET_SOURCES)
    device: str = _argument("cpu", "torch device for the policy")
    threads: int = _argument(0, "torch threads for the policy (0: torch's default, a thread a core); act-sim eval "
                             "uses 1, so that in-process and ROS evaluations do the same arithmetic", low=0)
    video_dir: str = _argument("", "write each episode's result (JSON) and video here")
    record_video: bool = _argument(True, "write the videos too (false: results only)")
    fps: int = FPS
    chunk_size: int = CHUNK_SIZE

    def __post_init__(self):
        if isinstance(self.cameras, str):  # launch arguments and flags give "front,wrist"
            object.__setattr__(self, "cameras", tuple(c.strip() for c in self.cameras.split(",") if c.strip()))
        problems = []
        for spec in dataclasses.fields(self):
            value, meta = getattr(self, spec.name), spec.metadata
            if "choices" in meta and value not in meta["choices"]:
                problems.append(f"{spec.name} must be one of {', '.join(meta['choices'])}, got {value!r}")
            if "low" in meta and value < meta["low"]:
                problems.append(f"{spec.name} must be at least {meta['low']}, got {value}")
            if "high" in meta and value > meta["high"]:
                problems.append(f"{spec.name} must be at most {meta['high']}, got {value}")
        unknown = [c for c in self.cameras if c not in CAMERAS]
        if unknown or not self.cameras or len(set(self.cameras)) != len(self.cameras):
            problems.append(f"cameras must be distinct names among {', '.join(CAMERAS)}, got {list(self.cameras)}")
        if self.policy == "act" and not self.checkpoint:
            if (Path(shipped_checkpoint()) / "config.json").is_file():
                object.__setattr__(self, "checkpoint", shipped_checkpoint())
            else:
                problems.append(f"policy:=act needs checkpoint:=<pretrained_model folder> (this install ships no "
                                f"models/{SHIPPED_MODEL})")
        if problems:
            raise ValueError("; ".join(problems))

    # --- from and to launch arguments --------------------------------------------------------------
    @classmethod
    def launch_arguments(cls) -> dict[str, tuple[str, str]]:
        """Every launch argument: name -> (default as text, description)."""
        return {spec.name: (_text(spec.default), spec.metadata["description"])
                for spec in dataclasses.fields(cls) if "description" in spec.metadata}

    @classmethod
    def from_arguments(cls, arguments: dict[str, str]) -> GraphConfig:
        """A checked config from launch-argument strings (name:=value); unknown names are refused."""
        known = cls.launch_arguments()
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            raise ValueError(f"unknown launch arguments {unknown}; known: {sorted(known)}")
        values = {}
        for spec in dataclasses.fields(cls):
            if spec.name in arguments:
                values[spec.name] = _parse(spec.name, str(arguments[spec.name]), spec.default)
        return cls(**values)

    def to_arguments(self) -> dict[str, str]:
        """The launch arguments (name:=text) that make this config: from_arguments(c.to_arguments()) == c."""
        return {name: _text(getattr(self, name)) for name in self.launch_arguments()}

    # --- what it produces ----------------------------------------------------------------------------
    @property
    def image_size(self) -> tuple[int, int]:
        return self.image_height, self.image_width

    def replan_ticks(self) -> int:
        """The chunk cadence the policy and the sim share: given, the checkpoint's n_action_steps, or the expert's."""
        if self.replan_every:
            return self.replan_every
        if self.policy == "act":
            return checkpoint_n_action_steps(self.checkpoint)
        return REPLAN_EVERY

    def stale_after_s(self) -> float:
        """A chunk must stay usable until the next one is due, with a tick to spare (at least a second)."""
        return max(1.0, (self.replan_ticks() + 1) / self.fps)

    def sim_renderer(self) -> str:
        """The renderer the sim is built with: `renderer`, except that "auto" with a checkpoint that takes images
        is the renderer its dataset was recorded with (TinyRenderer for one recorded before datasets said);
        otherwise "auto" stays: the table-top picks the faster for its image size (cameras.auto_renderer)."""
        trained = self._trained_renderer() if self.renderer == "auto" else None
        return trained or self.renderer

    def renderer_mismatch(self) -> str | None:
        """A warning when `renderer` was chosen against what the checkpoint's images were drawn with."""
        trained = self._trained_renderer() if self.renderer != "auto" else None
        if trained is None or trained == self.renderer:
            return None
        return (f"renderer {self.renderer!r}, but {self.checkpoint} was trained on images drawn with {trained!r} "
                f"(they light the scene differently): leave renderer at auto to draw with {trained!r}")

    def _trained_renderer(self) -> str | None:
        return trained_renderer(self.checkpoint) if self.policy == "act" else None

    def env_kwargs(self) -> dict:
        """PickObjectEnv's keyword arguments."""
        return dict(objects=self.objects, cameras=self.cameras, image_size=self.image_size, fps=self.fps,
                    max_steps=self.max_steps, target_source=self.target_source, renderer=self.sim_renderer())

    def replace(self, **changes) -> GraphConfig:
        return dataclasses.replace(self, **changes)


def shipped_checkpoint() -> str:
    """The ACT checkpoint this package ships: models/act_pick is a LeRobot pretrained_model folder (config,
    weights, both processors) with its model card, README.md. policy:=act's default."""
    from act_node.paths import models_dir

    return str(models_dir() / SHIPPED_MODEL)


def checkpoint_cameras(checkpoint: str | Path) -> dict[str, tuple[int, int]]:
    """{camera: (H, W)} a checkpoint was trained on, from its config.json (no torch); ValueError if unreadable."""
    config = Path(checkpoint) / "config.json"
    try:
        features = json.loads(config.read_text())["input_features"]
        return {key.rsplit(".", 1)[1]: (int(f["shape"][1]), int(f["shape"][2]))
                for key, f in features.items() if key.startswith("observation.images.")}
    except (OSError, KeyError, ValueError, IndexError, TypeError) as error:
        raise ValueError(f"cannot read the cameras from {config}: {error!r}") from None


def readable_checkpoint_cameras(checkpoint: str | Path) -> dict[str, tuple[int, int]] | None:
    """checkpoint_cameras, or None when the config.json does not read (ChunkPolicy.load then names what is wrong
    with the folder); {} is a checkpoint that takes no images."""
    try:
        return checkpoint_cameras(checkpoint)
    except ValueError:
        return None


# Which renderer drew a dataset's images: meta/<RENDERER_FILE> in a dataset (act-sim record writes it) and
# <RENDERER_FILE> in a checkpoint's pretrained_model folder (act-sim train copies it there from the dataset).
RENDERER_FILE = "act_node_renderer.json"


def recorded_renderer(folder: str | Path) -> str | None:
    """The renderer named in folder/RENDERER_FILE, or None when there is no such file; ValueError if it names
    none of RENDERERS or does not read."""
    path = Path(folder) / RENDERER_FILE
    if not path.is_file():
        return None
    try:
        renderer = json.loads(path.read_text())["renderer"]
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise ValueError(f"cannot read the renderer from {path}: {error!r}") from None
    if renderer not in RENDERERS:
        raise ValueError(f"{path} names renderer {renderer!r}, not one of {list(RENDERERS)}")
    return renderer


def write_renderer(folder: str | Path, renderer: str) -> None:
    if renderer not in RENDERERS:
        raise ValueError(f"renderer must be one of {list(RENDERERS)}, got {renderer!r}")
    path = Path(folder) / RENDERER_FILE
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps({"renderer": renderer}) + "\n")
    scratch.replace(path)


def dataset_renderer(root: str | Path) -> str | None:
    """The renderer of a dataset recorded here: its meta/RENDERER_FILE; "tiny" for a LeRobotDataset without one
    (act-sim record drew every camera with TinyRenderer before it wrote the file); None if root holds no dataset."""
    meta = Path(root) / "meta"
    recorded = recorded_renderer(meta)
    if recorded is None and (meta / "info.json").is_file():
        return "tiny"
    return recorded


def checkpoint_renderer(checkpoint: str | Path) -> str | None:
    """The renderer a checkpoint's training images were drawn with: its own RENDERER_FILE, else its training
    dataset's (train_config.json's dataset.root); None when neither says (a checkpoint from elsewhere, or its
    dataset is not on this machine)."""
    own = recorded_renderer(checkpoint)
    if own is not None:
        return own
    root = training_dataset_root(checkpoint)
    return dataset_renderer(root) if root else None


def trained_renderer(checkpoint: str | Path) -> str | None:
    """What drew a camera checkpoint's training images (checkpoint_renderer; TinyRenderer when nothing says:
    every camera dataset before RENDERER_FILE); None for a checkpoint that takes no images or does not read."""
    if not readable_checkpoint_cameras(checkpoint):
        return None
    return checkpoint_renderer(checkpoint) or "tiny"


def training_dataset_root(checkpoint: str | Path) -> str | None:
    """The local dataset root a lerobot-train checkpoint was trained on (train_config.json), if it names one."""
    try:
        root = json.loads((Path(checkpoint) / "train_config.json").read_text())["dataset"]["root"]
    except (OSError, KeyError, ValueError, TypeError):
        return None
    return str(root) if root else None


def checkpoint_n_action_steps(checkpoint: str | Path) -> int:
    config = Path(checkpoint) / "config.json"
    try:
        return int(json.loads(config.read_text())["n_action_steps"])
    except (OSError, KeyError, ValueError) as error:
        raise ValueError(f"cannot read n_action_steps from {config}: {error}") from None


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _parse(name: str, text: str, default):
    """A launch argument's text as the type of its default; a clear error naming the argument."""
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return text.lower() == "true"
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError as error:
        raise ValueError(f"launch argument {name}:={text!r} is not a {type(default).__name__} ({error})") from None
    return text
