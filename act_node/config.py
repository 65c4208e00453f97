"""One validated configuration of the graph and its facts, each defined once.

`GraphConfig` is what a user chooses (launch arguments, `act-sim eval` flags, the LeRobot env plugin's
fields): its fields' defaults, descriptions and limits are the one table's (act_node.settings, group "graph");
it checks itself when made, and produces everything downstream from the same values:

    GraphConfig.launch_arguments()      name -> (default text, description): sim.launch.py and act-sim launch
    GraphConfig.from_arguments({...})   launch-argument strings -> a checked config
    config.env_kwargs()                 PickObjectEnv's keyword arguments (in-process eval, the LeRobot plugin)
    config.facts                        what the checkpoint says about itself (CheckpointFacts), read once when
                                        the config is made: every fact asked later comes from this value
    nodes.graph.describe(...)           each node's ROS parameters, taken from these fields (the nodes
                                        declare them from the same table: nodes.parameters.declare_node)

Defaults, and why:
- 30 fps: LeRobot's SO-101 recording rate; the sim steps physics at 240 Hz, 8 substeps a tick.
- chunk 100: ACT's chunk. Re-plan every 30 ticks (once a second at 30 fps; the grasp takes about 4 s): the expert's
  cadence and the n_action_steps the recipes write; a checkpoint re-plans as its own config says (1 when it
  ensembles, as the shipped one does: GraphConfig.replan_ticks).
- episodes of 300 ticks (10 s): the expert needs about 5 s.
- velocity bound: the STS3215's no-load speed (act_node.so101).
- images: 240x320 for the sim's own views and videos, 96x128 for training a camera policy (the camera recipe's
  size; the shipped checkpoint, models/act_target_tool_yaw_grasp, takes no image into ACT: its yaw reader reads the
  front and wrist cameras at 96x128, so a graph running it keeps the 96x128 default).
- renderer auto: the faster for the image size (bench/bench_render.py; the timings: docs/measured_defaults.md):
  TinyRenderer at the 96x128 default, pybullet's EGL plugin from 32,000 pixels a frame where it loads; a
  checkpoint that takes images gets the renderer its dataset was recorded with (`checkpoint_renderer`): the two
  light the scene differently.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

from act_node.checkpoints import (
    checkpoint_ensemble_coeff,
    checkpoint_layout,
    checkpoint_n_action_steps,
    trained_renderer,
)
from act_node.chunks import ENSEMBLE_COEFF
from act_node.observation import requested_kind
from act_node.settings import (  # noqa: F401 (the graph's constants are read from here too)
    CHUNK_SIZE,
    CLOCKS,
    DEFAULT_CAMERAS,
    EPISODE_STEPS,
    FPS,
    MERGE_CHOICES,
    POLICIES,
    REPLAN_EVERY,
    SCENE_SOURCES,
    SETTINGS,
    SHIPPED_MODEL,
    TARGET_SOURCES,
    TRAIN_IMAGE_SIZE,
    text,
)
from act_node.table_frame import CAMERA_NAMES, ENV_LAYOUTS, KIND_NAMES, RENDER_CHOICES  # noqa: F401

SIM_IMAGE_SIZE = (240, 320)


INFERENCE_ALLOWANCE_S = 0.5  # stale_after_s: how late past its due tick the next chunk may land


def _argument(name: str):
    """GraphConfig's field `name`: its default, description and limits from the one table (act_node.settings)."""
    entry = SETTINGS[name]
    limits = {key: getattr(entry, key) for key in ("low", "high", "choices") if getattr(entry, key) is not None}
    return field(default=entry.default, metadata={"description": entry.description, **limits})


IMAGE_KEY = "observation.images."


def parse_rename_map(text: str) -> dict[str, str]:
    """lerobot-eval's --rename_map, a JSON object {the env's key: the checkpoint's key}, for cameras here:
    {"observation.images.front": "observation.images.laptop"}; ValueError naming what is wrong."""
    try:
        rename_map = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--rename_map takes a JSON object such as '{{\"{IMAGE_KEY}front\": "
                         f"\"{IMAGE_KEY}laptop\"}}', got {text!r} ({error})") from None
    if not isinstance(rename_map, dict) or not all(isinstance(v, str) for v in rename_map.values()):
        raise ValueError(f"--rename_map takes a JSON object of key to key, got {text!r}")
    for key, value in rename_map.items():
        if not key.startswith(IMAGE_KEY) or key.removeprefix(IMAGE_KEY) not in CAMERA_NAMES:
            raise ValueError(f"--rename_map: {key!r} is none of the sim's cameras "
                             f"({', '.join(IMAGE_KEY + c for c in CAMERA_NAMES)}); it maps the env's key to the "
                             "checkpoint's, as lerobot-eval's does")
        if not value.startswith(IMAGE_KEY) or value == IMAGE_KEY:
            raise ValueError(f"--rename_map: {key!r} -> {value!r}: a camera goes to a camera "
                             f"({IMAGE_KEY}<the checkpoint's name>)")
    if len(set(rename_map.values())) != len(rename_map):
        raise ValueError(f"--rename_map gives one checkpoint camera two of the sim's: {rename_map}")
    return rename_map


def camera_names_given(rename_map: dict[str, str]) -> dict[str, str]:
    """{sim camera: the checkpoint's camera it is given as} for the cameras `rename_map` renames."""
    return {key.removeprefix(IMAGE_KEY): value.removeprefix(IMAGE_KEY) for key, value in rename_map.items()}


@dataclass(frozen=True)
class CheckpointFacts:
    """What a checkpoint's files say that the graph is made from, read once (act_node.checkpoints' readers).

    A fact that does not read keeps its reader's message in `errors`, raised as ValueError when the fact is asked
    for (`fact`): a config is made before anyone needs to know (the policy node, loading the folder, names what is
    wrong with it)."""

    checkpoint: str = ""
    has_config: bool = False
    n_action_steps: int | None = None
    ensemble_coeff: float | None = None  # None: it runs its chunks n_action_steps at a time
    layout: str | None = None  # its environment_state layout; None: none, or none that reads
    renderer: str | None = None  # what drew its training images; None: it takes none, or does not read
    errors: dict = field(default_factory=dict)  # fact -> why it does not read

    @classmethod
    def read(cls, checkpoint: str) -> CheckpointFacts:
        if not checkpoint or not (Path(checkpoint) / "config.json").is_file():
            missing = f"cannot read n_action_steps from {Path(checkpoint) / 'config.json'}: no such file"
            return cls(checkpoint=checkpoint, errors={"n_action_steps": missing})
        values, errors = {}, {}
        for name, reader in (("n_action_steps", checkpoint_n_action_steps),
                             ("ensemble_coeff", checkpoint_ensemble_coeff), ("renderer", trained_renderer)):
            try:
                values[name] = reader(checkpoint)
            except ValueError as error:
                errors[name] = str(error)
        return cls(checkpoint=checkpoint, has_config=True, layout=checkpoint_layout(checkpoint), errors=errors,
                   **values)

    def fact(self, name: str):
        """The fact `name`; ValueError with its reader's message when it did not read."""
        if name in self.errors:
            raise ValueError(self.errors[name])
        return getattr(self, name)


@dataclass(frozen=True)
class GraphConfig:
    """The graph's launch arguments (act_node.settings' group "graph"), checked when made."""

    policy: str = _argument("policy")
    checkpoint: str = _argument("checkpoint")
    clock: str = _argument("clock")
    cameras: tuple[str, ...] = _argument("cameras")
    rename_map: str = _argument("rename_map")
    image_height: int = _argument("image_height")
    image_width: int = _argument("image_width")
    objects: int = _argument("objects")
    renderer: str = _argument("renderer")
    episodes: int = _argument("episodes")
    first_seed: int = _argument("first_seed")
    replan_every: int = _argument("replan_every")
    camera_every: int = _argument("camera_every")
    merge: str = _argument("merge")
    max_velocity: float = _argument("max_velocity")
    max_steps: int = _argument("max_steps")
    lockstep_timeout_s: float = _argument("lockstep_timeout_s")
    respawn: bool = _argument("respawn")
    target_source: str = _argument("target_source")
    scene: str = _argument("scene")
    scene_reader: str = _argument("scene_reader")
    camera_calibration: str = _argument("camera_calibration")
    device: str = _argument("device")
    threads: int = _argument("threads")
    video_dir: str = _argument("video_dir")
    record_video: bool = _argument("record_video")
    fps: int = FPS
    chunk_size: int = CHUNK_SIZE
    facts: CheckpointFacts = field(default=CheckpointFacts(), init=False, repr=False, compare=False)

    def __post_init__(self):
        if isinstance(self.cameras, str):  # launch arguments and flags give "front,wrist"
            object.__setattr__(self, "cameras", tuple(c.strip() for c in self.cameras.split(",") if c.strip()))
        if self.target_source == "truth":  # the target is the sim's: no selector, nothing for a reader to read
            object.__setattr__(self, "scene", "sim")
        problems = []
        for spec in dataclasses.fields(self):
            value, meta = getattr(self, spec.name), spec.metadata
            if "choices" in meta and value not in meta["choices"]:
                problems.append(f"{spec.name} must be one of {', '.join(meta['choices'])}, got {value!r}")
            if "low" in meta and value < meta["low"]:
                problems.append(f"{spec.name} must be at least {meta['low']}, got {value}")
            if "high" in meta and value > meta["high"]:
                problems.append(f"{spec.name} must be at most {meta['high']}, got {value}")
        unknown = [c for c in self.cameras if c not in CAMERA_NAMES]
        if unknown or not self.cameras or len(set(self.cameras)) != len(self.cameras):
            problems.append(f"cameras must be distinct names among {', '.join(CAMERA_NAMES)}, got {list(self.cameras)}")
        if self.rename_map:
            try:
                renamed = camera_names_given(parse_rename_map(self.rename_map))
            except ValueError as error:
                problems.append(str(error).replace("--rename_map", "rename_map", 1))
            else:
                strays = [c for c in renamed if c not in self.cameras]
                if strays:
                    problems.append(f"rename_map renames cameras {strays}, which are not among cameras "
                                    f"{list(self.cameras)}")
        if self.policy == "act" and not self.checkpoint:
            if (Path(shipped_checkpoint()) / "config.json").is_file():
                object.__setattr__(self, "checkpoint", shipped_checkpoint())
            else:
                problems.append(f"policy:=act needs checkpoint:=<pretrained_model folder> (this install ships no "
                                f"models/{SHIPPED_MODEL})")
        if problems:
            raise ValueError("; ".join(problems))
        if self.policy == "act":
            object.__setattr__(self, "facts", CheckpointFacts.read(self.checkpoint))

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
        refuse_unknown_arguments(arguments, known)
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

    def checkpoint_cameras(self) -> dict[str, str]:
        """{camera: the checkpoint's name for it} for every camera, by rename_map (unnamed there: its own name)."""
        if not self.rename_map:
            return {camera: camera for camera in self.cameras}
        renamed = camera_names_given(parse_rename_map(self.rename_map))
        return {camera: renamed.get(camera, camera) for camera in self.cameras}

    def replan_ticks(self) -> int:
        """The chunk cadence the policy and the sim share: given; 1 for ACT's temporal ensembling (a chunk every
        tick, as LeRobot's ACTPolicy asks with n_action_steps 1); the checkpoint's n_action_steps; the expert's."""
        if self.replan_every:
            return self.replan_every
        if self.policy == "act":
            return 1 if self.chunk_merge()[0] == "ensemble" else self.facts.fact("n_action_steps")
        return REPLAN_EVERY

    def chunk_merge(self) -> tuple[str, float]:
        """The merge rule (act_node.chunks.MERGE_RULES) and ACT's ensembling coefficient: "auto" is the checkpoint's
        own, "ensemble" when its config.json sets temporal_ensemble_coeff, as LeRobot's ACTPolicy then runs it (so
        lerobot-eval, `act-sim eval` and the graph execute it alike), else "replace"; the coefficient is the
        checkpoint's, or ACT's 0.01. A checkpoint folder without config.json counts as one without a coefficient
        (the policy node, loading it, refuses it and says why); ValueError when its coefficient does not read."""
        own = self.facts.fact("ensemble_coeff")
        coeff = ENSEMBLE_COEFF if own is None else own
        if self.merge != "auto":
            return self.merge, coeff
        return ("ensemble" if own is not None else "replace"), coeff

    def stale_after_s(self) -> float:
        """A chunk must stay usable until the next one is due and answered: the next is asked for at the joint
        states of replan_every ticks on and lands an inference later, so half a second is left for that (at least
        a second in all). A tick to spare was too little: on the simulated arm a chunk checkpoint re-planning every
        30 ticks held the arm about once a second, whenever inference took longer than a tick (results/arm_walk)."""
        return max(1.0, self.replan_ticks() / self.fps + INFERENCE_ALLOWANCE_S)

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
        return self.facts.fact("renderer")

    def environment_layout(self) -> str:
        """The environment_state layout the env builds (act_node.observation): the checkpoint's, by its size; the
        first layout for the expert, or for a checkpoint whose config does not read or whose size is none of them
        (loading it then names what is wrong)."""
        return self.facts.layout or ENV_LAYOUTS[0]

    def env_kwargs(self) -> dict:
        """PickObjectEnv's keyword arguments."""
        return dict(objects=self.objects, cameras=self.cameras, image_size=self.image_size, fps=self.fps,
                    max_steps=self.max_steps, target_source=self.target_source, renderer=self.sim_renderer(),
                    environment_layout=self.environment_layout(), scene=self.scene,
                    **({"scene_reader_model": self.scene_reader} if self.scene == "cameras" else {}))

    def chosen(self) -> dict:
        """The settings as chosen (every field but the checkpoint's facts read from its files), for reports."""
        return {spec.name: getattr(self, spec.name) for spec in dataclasses.fields(self) if spec.init}

    def replace(self, **changes) -> GraphConfig:
        return dataclasses.replace(self, **changes)


def refuse_unknown_arguments(given, known) -> None:
    """ValueError in one line when `given` names a launch argument not in `known`: each with the nearest known name
    (dryrun -> dry_run), then every known name."""
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return
    guesses = []
    for name in unknown:
        near = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
        guesses.append(f"{name} (did you mean {near[0]}?)" if near else name)
    raise ValueError(f"unknown launch arguments: {', '.join(guesses)}; known: {', '.join(sorted(known))} "
                     f"(act-sim launch --show-args describes each)")


def task_kind(task: str) -> str:
    """The object kind a task text asks for ("pick up the cup" -> "cup"); ValueError in one line when it asks for
    none of the kinds the table-top knows (a policy fed the request, the expert and the selector need one)."""
    kind = requested_kind(task)
    if kind not in KIND_NAMES:
        asked = (f"asks for {kind!r}, which is no kind of the table-top" if kind
                 else "does not read 'pick up the <kind>'")
        raise ValueError(f"task:={task!r} {asked}: expected 'pick up the <kind>' with a kind among "
                         f"{', '.join(KIND_NAMES)}")
    return kind


def shipped_checkpoint() -> str:
    """The ACT checkpoint this package ships: models/<SHIPPED_MODEL> is a LeRobot pretrained_model folder (config,
    weights, both processors) with its model card, README.md. policy:=act's default."""
    from act_node.paths import models_dir

    return str(models_dir() / SHIPPED_MODEL)


_text = text  # a value as launch-argument text (act_node.settings.text)


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
