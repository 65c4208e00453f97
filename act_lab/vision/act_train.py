"""The recipe's ACT stage: LeRobot's ACTPolicy with the pretrained backbone frozen, trained on its cached maps.

lerobot-train cannot load a local backbone (pretrained_backbone_weights names torchvision weights only) and runs
ResNet-18 forward for every sample; this loop trains the same ACTPolicy, with LeRobot's own optimizer groups
(`get_optim_params`: the frozen backbone's group is empty), LeRobot's loss (`ACTPolicy.forward`), LeRobot's
processors for normalization, and the preset's AdamW and gradient clipping (10). What differs is only where the
layer4 maps come from: `model.backbone` is swapped for a module that hands back the map cached for the frame
(vision/cache.py; exact, the backbone has FrozenBatchNorm2d and no gradient), and the real backbone is put back
for every checkpoint saved. A checkpoint is a plain LeRobot `pretrained_model` folder: ACTPolicy.from_pretrained,
lerobot-eval and the policy node load it unchanged and run the backbone on camera images.

    python -m act_lab.vision.act_train --dataset outputs/recipe/data --cache outputs/recipe/cache \
        --backbone outputs/recipe/encoder/backbone.safetensors --out outputs/recipe/act --steps 30000

Samples are drawn as lerobot-train draws them: a frame uniformly, its action chunk the next CHUNK_SIZE actions
of its episode, padded past the episode's end with the last one and masked (`action_is_pad`). OUT/checkpoints/
NNNNNN/pretrained_model every --save-every steps (what `act-lab curve` evaluates), OUT/checkpoints/state.pt
(the optimizer, the step, the sampler's state) beside the newest; a stopped run started again continues there.
`--device cuda` trains on a GPU (the batches are drawn and normalized on the CPU, as here, then moved); the
checkpoints are saved from the CPU and say device "cpu", so they load the same anywhere. The device is not part
of the run's settings: a run may resume on another one (dropout then draws from another generator; on the same GPU
its generator's state is kept in state.pt).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from act_lab.vision.cache import camera_name, load_maps
from act_node.checkpoints import dataset_renderer, write_renderer
from act_node.chunks import checked_ensemble_coeff
from act_node.config import CHUNK_SIZE

STATE, ENV, ACTION = "observation.state", "observation.environment_state", "action"
IMAGE_PREFIX = "observation.images."
GRAD_CLIP_NORM = 10.0  # LeRobot's ACT preset (ACTConfig.get_optimizer_preset and TrainPipelineConfig)
SETTINGS_FILE = "act_node_training.json"  # in every pretrained_model folder: how it was trained
STATS_TOLERANCE = 1e-3  # --init-from: how far (in stds) its normalization may be from this dataset's and still be it


@dataclass(frozen=True)
class Settings:
    steps: int = 30_000
    batch_size: int = 8
    save_every: int = 2_000
    seed: int = 0
    use_environment_state: bool = True  # the ablation: the same run without the target and request
    use_cameras: bool = True  # the other ablation: the same run, data and loop without the images
    init_from: str | None = None  # a pretrained_model of the same data (the image-less run): its weights to start
    episodes: int | None = None  # train on the dataset's first N episodes only (the recipe's clean ones: 240)
    lr: float | None = None  # AdamW's learning rate; None: the recipe's (ACTConfig.optimizer_lr, 1e-4)
    # ACT's CVAE (LeRobot's defaults: a 4-layer encoder over the chunk, latent 32, KL weight 10; at inference the
    # latent is 0). Off in the recipe: the expert is scripted. But its grasp side depends on what the image-less
    # policy is not given (the neighbours, a ball's yaw: results/act_grasp), so to the policy it is not one-valued
    vae: bool = False
    # dropout on the cached layer4 maps while training (each number zeroed with this probability, the rest scaled by
    # 1/(1-p): torch's dropout); at inference the backbone's maps go in whole, so a checkpoint is a plain ACT. On the
    # recipe's 360 demonstrations the camera ACT without it fitted them better than the image-less one (L1 0.064
    # against 0.093 at 10,000 steps) and did worse in closed loop, on its own training scenes too
    # (results/act_cameras): a regularizer of the image path, measured there
    map_dropout: float = 0.0
    # the whole of a camera's map zeroed for a training sample with this probability, each camera on its own (no
    # rescaling): the policy must also act with that camera's tokens empty (the projection's bias and positions
    # only), the images on top; at inference every camera's maps go in, as with map_dropout
    camera_dropout: float = 0.0
    # the transformer's width (ACTConfig.dim_model) and its feed-forward's (dim_feedforward); 0: the recipe's,
    # act_node.training's 256 and 1024. Half of each costs about half a step on the CPU (issue 45's table)
    dim_model: int = 0
    dim_feedforward: int = 0
    # the forward pass under torch.autocast to bfloat16 (the weights, the optimizer and the checkpoints stay
    # float32; on a CPU with avx512_bf16 a step costs about two thirds)
    bf16: bool = False

    def __post_init__(self):
        for name, value in (("--dim-model", self.dim_model), ("--dim-feedforward", self.dim_feedforward)):
            if value < 0:
                raise ValueError(f"{name} must be > 0 (or 0: the recipe's), got {value}")
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"--lr must be a finite number > 0, got {self.lr}")
        for name, value in (("--map-dropout", self.map_dropout), ("--camera-dropout", self.camera_dropout)):
            if not (math.isfinite(value) and 0.0 <= value < 1.0):
                raise ValueError(f"{name} must be in [0, 1), got {value}")
            if value and not self.use_cameras:
                raise ValueError(f"{name} drops the image maps: an image-less run (--no-cameras) has none")


class CachedMaps(nn.Module):
    """Stands in for ACT's backbone while it is frozen: the 'image' it is given is the frame's cached layer4 map,
    in training mode with `dropout` on its numbers (Settings.map_dropout) and each sample's map zeroed whole with
    probability `camera_dropout` (Settings.camera_dropout; ACT calls the backbone once per camera)."""

    def __init__(self, dropout: float = 0.0, camera_dropout: float = 0.0):
        super().__init__()
        self.dropout = dropout
        self.camera_dropout = camera_dropout

    def forward(self, maps: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.training and self.camera_dropout:
            kept = torch.rand(maps.shape[0], *(1,) * (maps.dim() - 1), device=maps.device) >= self.camera_dropout
            maps = maps * kept
        return {"feature_map": nn.functional.dropout(maps, self.dropout, self.training) if self.dropout else maps}


@dataclass
class Demonstrations:
    """A LeRobotDataset's frames in memory: state, environment state, action, each frame's episode end
    (exclusive dataset index), and the cached maps per camera."""

    state: np.ndarray
    env: np.ndarray
    action: np.ndarray
    episode_end: np.ndarray
    maps: dict[str, np.ndarray]

    @classmethod
    def load(cls, dataset_root: Path, cache: Path, cameras: list[str], first_episodes: int | None = None
             ) -> Demonstrations:
        """`first_episodes`: only the dataset's first N episodes (by episode_index; a prefix of its frames)."""
        import pandas as pd

        files = sorted((Path(dataset_root) / "data").glob("chunk-*/file-*.parquet"))
        if not files:
            raise FileNotFoundError(f"no data/chunk-*/file-*.parquet under {dataset_root}")
        table = pd.concat([pd.read_parquet(path) for path in files]).sort_values("index")
        index = table["index"].to_numpy()
        if not np.array_equal(index, np.arange(len(index))):
            raise ValueError(f"{dataset_root}: frame indices are not 0..{len(index) - 1}")
        episodes = table["episode_index"].to_numpy()
        if first_episodes is not None:
            have = int(episodes.max()) + 1
            if not 0 < first_episodes <= have:
                raise ValueError(f"--episodes {first_episodes}: {dataset_root} has {have} episodes")
            keep = int(np.searchsorted(episodes, first_episodes))  # episode_index rises with index
            if np.any(episodes[:keep] >= first_episodes) or np.any(episodes[keep:] < first_episodes):
                raise ValueError(f"{dataset_root}: episodes are not stored in order, the first {first_episodes} "
                                 "are not a prefix of its frames")
            table, episodes = table.iloc[:keep], episodes[:keep]
        ends = np.zeros(len(episodes), dtype=np.int64)
        boundaries = np.flatnonzero(np.diff(episodes)) + 1
        for start, end in zip(np.r_[0, boundaries], np.r_[boundaries, len(episodes)], strict=True):
            ends[start:end] = end
        maps = load_maps(cache, cameras) if cameras else {}
        for camera, values in maps.items():
            if len(values) != len(index):
                raise ValueError(f"{cache}: {len(values)} {camera} maps for {len(index)} frames: the cache is of "
                                 "another dataset")
        maps = {camera: values[:len(episodes)] for camera, values in maps.items()}
        column = lambda name: np.stack(table[name].to_numpy()).astype(np.float32)  # noqa: E731
        return cls(column(STATE), column(ENV), column(ACTION), ends, maps)

    def __len__(self) -> int:
        return len(self.state)

    def batch(self, rng: np.random.Generator, size: int, chunk: int = CHUNK_SIZE) -> dict[str, torch.Tensor]:
        frames = rng.integers(0, len(self), size)
        ahead = frames[:, None] + np.arange(chunk)[None, :]
        pad = ahead >= self.episode_end[frames][:, None]
        ahead = np.minimum(ahead, self.episode_end[frames][:, None] - 1)
        batch = {STATE: torch.from_numpy(self.state[frames]), ACTION: torch.from_numpy(self.action[ahead]),
                 "action_is_pad": torch.from_numpy(pad)}
        if self.env.shape[1]:
            batch[ENV] = torch.from_numpy(self.env[frames])
        for camera, values in self.maps.items():
            batch[IMAGE_PREFIX + camera] = torch.from_numpy(values[frames].astype(np.float32))
        return batch


def policy_config(dataset_root: Path, use_environment_state: bool = True, use_cameras: bool = True,
                  vae: bool = False, dim_model: int = 0, dim_feedforward: int = 0):
    """The recipe's ACTConfig (training.act_config's numbers) for this dataset's features, images VISUAL IDENTITY
    (the encoder's input: float RGB in [0, 1]) and the backbone's learning rate 0 in spirit: it is frozen.
    Without `use_cameras` the dataset's videos are left out: an ACT on the joints (and target) only."""
    from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature

    from act_node.training import act_config

    info = json.loads((Path(dataset_root) / "meta" / "info.json").read_text())
    features = info["features"]
    inputs = {STATE: PolicyFeature(FeatureType.STATE, tuple(features[STATE]["shape"]))}
    if use_environment_state:
        inputs[ENV] = PolicyFeature(FeatureType.ENV, tuple(features[ENV]["shape"]))
    for key, feature in features.items():
        if feature["dtype"] == "video" and use_cameras:
            height, width, channels = feature["shape"]
            inputs[key] = PolicyFeature(FeatureType.VISUAL, (channels, height, width))
    outputs = {ACTION: PolicyFeature(FeatureType.ACTION, tuple(features[ACTION]["shape"]))}
    mapping = {"VISUAL": NormalizationMode.IDENTITY, "STATE": NormalizationMode.MEAN_STD,
               "ACTION": NormalizationMode.MEAN_STD}
    sizes = {name: value for name, value in (("dim_model", dim_model), ("dim_feedforward", dim_feedforward)) if value}
    config = act_config(inputs, outputs, normalization_mapping=mapping, **({"use_vae": True} if vae else {}), **sizes)
    if config.dim_model % config.n_heads:
        raise ValueError(f"--dim-model {config.dim_model} must be a multiple of ACT's {config.n_heads} heads")
    return config


def execution_config(config, ensemble_coeff: float):
    """`config` saying the execution measured on the shipped checkpoint (models/act_target_tool_yaw): ACT's temporal
    ensembling with this coefficient, so n_action_steps 1. lerobot-eval, act-sim eval and the graph (merge:=auto)
    read it from the checkpoint's config.json. Training is the same either way. ValueError on a coefficient that is
    not a finite number."""
    from dataclasses import replace

    return replace(config, n_action_steps=1, temporal_ensemble_coeff=checked_ensemble_coeff(ensemble_coeff))


def dataset_stats(dataset_root: Path, keys: list[str]) -> dict[str, dict[str, torch.Tensor]]:
    stats = json.loads((Path(dataset_root) / "meta" / "stats.json").read_text())
    return {key: {name: torch.tensor(value, dtype=torch.float32) for name, value in stats[key].items()}
            for key in keys if key in stats}


def _normalizer(pipeline):
    """The normalization step of a LeRobot processor pipeline (its state: the dataset's statistics)."""
    from lerobot.processor import NormalizerProcessorStep

    return next(step for step in pipeline.steps if isinstance(step, NormalizerProcessorStep))


def warm_start(policy, preprocessor, checkpoint: Path) -> list[str]:
    """Start `policy` from another ACT checkpoint of the same data: typically the image-less run's, so that a
    camera run begins with a policy that already reaches and holds, and its image tokens are added to it.

    Every weight of the checkpoint is loaded into the key of the same name (ACT's transformer, the joint and
    target projections, the action head, the latent); the policy's keys the checkpoint lacks (the backbone, the
    image projection) stay as they are. Returns those keys. ValueError, naming the first offender, when the
    checkpoint has a key the policy lacks or of another shape, or was normalized with other statistics (other
    data: the same weights would then mean something else)."""
    from safetensors.torch import load_file

    model = Path(checkpoint)
    weights_file = model / "model.safetensors"
    if not weights_file.is_file():
        raise FileNotFoundError(f"--init-from {model}: no model.safetensors (a pretrained_model folder is expected)")
    weights = load_file(str(weights_file))
    ours = policy.state_dict()
    for key, value in weights.items():
        if key not in ours:
            raise ValueError(f"--init-from {model}: {key} is not in this policy (another architecture)")
        if tuple(value.shape) != tuple(ours[key].shape):
            raise ValueError(f"--init-from {model}: {key} is {tuple(value.shape)} there, {tuple(ours[key].shape)} "
                             "here")
    stats_files = sorted(model.glob("policy_preprocessor_step_*_normalizer_processor.safetensors"))
    if not stats_files:
        raise FileNotFoundError(f"--init-from {model}: no policy_preprocessor normalizer statistics")
    theirs, here = load_file(str(stats_files[0])), _normalizer(preprocessor).state_dict()
    for feature in (STATE, ENV, ACTION):
        for moment in ("mean", "std"):
            key = f"{feature}.{moment}"
            if key not in here:
                continue
            # in units of the feature's spread: the same episodes recorded on another machine differ by float
            # rounding (measured: 1.8e-4 of a std in environment_state's tool point), other data by far more
            scale = here.get(f"{feature}.std", torch.ones_like(here[key])).abs().clamp_min(1e-8)
            if key not in theirs or theirs[key].shape != here[key].shape or \
                    ((theirs[key] - here[key]).abs() / scale).max() > STATS_TOLERANCE:
                raise ValueError(f"--init-from {model}: its {key} is not this dataset's (beyond {STATS_TOLERANCE} "
                                 "of a std): it was trained on other data")
    policy.load_state_dict(weights, strict=False)
    return sorted(set(ours) - set(weights))


def training_device(name: str) -> torch.device:
    """The torch device a run trains on; ValueError naming it when this machine has no such device."""
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise ValueError(f"--device {name!r}: not a torch device ({error})") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name!r}: torch {torch.__version__} sees no CUDA device on this machine")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"--device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {name!r}: act_train runs on cpu or cuda")
    return device


def dataset_size(root: Path) -> dict[str, int]:
    """{"episodes", "frames"} of the LeRobot dataset at `root` as its meta/info.json says now."""
    info = json.loads((Path(root) / "meta" / "info.json").read_text())
    return {"episodes": int(info["total_episodes"]), "frames": int(info["total_frames"])}


class Run:
    """One ACT training run in OUT: build or resume, step, checkpoint."""

    def __init__(self, dataset_root: Path, cache: Path | None, backbone: Path | None, out: Path, settings: Settings,
                 device: str = "cpu", ensemble_coeff: float | None = None):
        from lerobot.policies.act.modeling_act import ACTPolicy
        from lerobot.policies.factory import make_pre_post_processors

        from act_node.perception.backbone import load_backbone

        self.device = training_device(device)
        self.dataset_root = Path(dataset_root)
        self.backbone_path = Path(backbone) if backbone is not None else None  # None: image-less, none is read
        self.out, self.settings = Path(out), settings
        self.ensemble_coeff = ensemble_coeff
        self.config = policy_config(dataset_root, settings.use_environment_state, settings.use_cameras, settings.vae,
                                    settings.dim_model, settings.dim_feedforward)
        if ensemble_coeff is not None:  # how the checkpoints run, not how they train (ACTPolicy.forward reads neither)
            self.config = execution_config(self.config, ensemble_coeff)
        self.cameras = [camera_name(key) for key in self.config.image_features]
        if self.cameras and (self.backbone_path is None or cache is None):
            raise ValueError("a camera ACT needs the backbone and the cache of its maps (or no cameras)")
        self.data = Demonstrations.load(dataset_root, cache, self.cameras, settings.episodes)
        if not settings.use_environment_state:
            self.data.env = np.zeros((len(self.data), 0), dtype=np.float32)
        torch.manual_seed(settings.seed)
        self.policy = ACTPolicy(self.config)
        self.backbone = None  # without cameras ACT has no backbone
        if self.cameras:
            load_backbone(self.policy, self.backbone_path)
            self.backbone = self.policy.model.backbone
            for parameter in self.backbone.parameters():
                parameter.requires_grad_(False)
        stats = dataset_stats(dataset_root, [STATE, ENV, ACTION])
        self.preprocessor, self.postprocessor = make_pre_post_processors(self.config, dataset_stats=stats)
        self.warm_started: list[str] = []
        if settings.init_from:  # before _restore: a resumed run then loads its own newest weights over these
            self.warm_started = warm_start(self.policy, self.preprocessor, Path(settings.init_from))
        self.policy.to(self.device)  # before the optimizer's groups are taken: module.to keeps the parameters
        groups = [group for group in self.policy.get_optim_params() if any(True for _ in group["params"])]
        groups = [{**group, "params": list(group["params"])} for group in groups]
        if settings.lr is not None:  # the checkpoints' config.json then says the rate they were trained at
            self.config.optimizer_lr = settings.lr
        self.optimizer = torch.optim.AdamW(groups, lr=self.config.optimizer_lr,
                                           weight_decay=self.config.optimizer_weight_decay)
        self.rng = np.random.default_rng(settings.seed)
        self.step = 0
        self.history: list[dict] = []
        self._restore()

    def _backbone_slot(self, cached: bool) -> None:
        """ACT's backbone slot: the cached maps while training, the real backbone for a checkpoint and after;
        nothing to do without cameras (no backbone)."""
        if self.backbone is not None:
            cached_maps = CachedMaps(self.settings.map_dropout, self.settings.camera_dropout)
            self.policy.model.backbone = cached_maps if cached else self.backbone

    def _backbone_name(self) -> str | None:
        return str(self.backbone_path.resolve()) if self.backbone_path is not None else None

    @property
    def checkpoints(self) -> Path:
        return self.out / "checkpoints"

    def _restore(self) -> None:
        state_path = self.checkpoints / "state.pt"
        pinned = self.out / "run.json"
        wanted = {"settings": {**asdict(self.settings), "steps": None}, "dataset": str(self.dataset_root.resolve()),
                  "backbone": self._backbone_name(), "dataset_size": dataset_size(self.dataset_root),
                  # not training, but a run resumed with another would save checkpoints that run unlike its first
                  "ensemble_coeff": self.ensemble_coeff}
        if pinned.is_file():
            there = json.loads(pinned.read_text())
            # a setting added since that run was pinned was its default then; a pin without the dataset's size or
            # the ensembling (written before they were pinned) is not compared on them
            there["settings"] = {**asdict(Settings()), "steps": None, **there.get("settings", {})}
            there.setdefault("dataset_size", wanted["dataset_size"])
            there.setdefault("ensemble_coeff", wanted["ensemble_coeff"])
            if not self.settings.use_cameras:  # no backbone is read: whatever path an image-less run was given
                there["backbone"] = wanted["backbone"] = None
            if there["dataset_size"] != wanted["dataset_size"]:
                raise SystemExit(f"{self.out} holds a run on {there['dataset_size']['episodes']} episodes "
                                 f"({there['dataset_size']['frames']} frames) of {self.dataset_root}, which holds "
                                 f"{wanted['dataset_size']['episodes']} ({wanted['dataset_size']['frames']}) now: a "
                                 f"run does not change its data midway; train on it with another --out")
            if there["dataset"] != wanted["dataset"] and {**there, "dataset": wanted["dataset"]} == wanted:
                # the same recording in another folder (a committed stage carried to another machine, whose recipe
                # recorded the demonstrations again): the run goes on, and is pinned to where its data is now
                print(f"note: {self.out} was trained on {there['dataset']}; it goes on with {wanted['dataset']}, "
                      f"which holds as many episodes and frames", flush=True)
                pinned.write_text(json.dumps(wanted, indent=1) + "\n")
                there = wanted
            if there != wanted:
                raise SystemExit(f"{self.out} holds a run with other settings ({there} there, {wanted} asked): use "
                                 "another --out")
        else:
            self.out.mkdir(parents=True, exist_ok=True)
            pinned.write_text(json.dumps(wanted, indent=1) + "\n")
        if not state_path.is_file():
            return
        state = torch.load(state_path, weights_only=False, map_location="cpu")  # the optimizer moves its own
        from safetensors.torch import load_file

        weights = load_file(str(self.checkpoints / f"{state['step']:06d}" / "pretrained_model" / "model.safetensors"))
        self.policy.load_state_dict(weights, strict=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        if self.device.type == "cuda" and state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.step = state["step"]
        self.history = state["history"]
        print(f"resuming {self.out} at step {self.step}", flush=True)

    def save(self) -> Path:
        folder = self.checkpoints / f"{self.step:06d}"
        scratch = self.checkpoints / f"{self.step:06d}.partial"
        shutil.rmtree(scratch, ignore_errors=True)
        model = scratch / "pretrained_model"
        self._backbone_slot(cached=False)
        self.policy.to("cpu")  # the same weights; the optimizer keeps its parameters (module.to moves their data)
        try:
            self.policy.save_pretrained(model)
        finally:
            self.policy.to(self.device)
            self._backbone_slot(cached=True)
        self.preprocessor.save_pretrained(model)
        self.postprocessor.save_pretrained(model)
        renderer = dataset_renderer(self.dataset_root)
        if renderer:
            write_renderer(model, renderer)
        (model / SETTINGS_FILE).write_text(json.dumps({
            "trainer": "act_lab.vision.act_train (LeRobot ACTPolicy, " + (
                "frozen pretrained backbone, cached maps)" if self.backbone is not None else "no cameras)"),
            "dataset_root": str(self.dataset_root.resolve()), "backbone": self._backbone_name(),
            "step": self.step, "frames": len(self.data), **asdict(self.settings)}, indent=1) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(scratch, folder)
        state = {"step": self.step, "optimizer": self.optimizer.state_dict(), "rng": self.rng.bit_generator.state,
                 "torch_rng": torch.get_rng_state(), "history": self.history,
                 # dropout on a GPU draws from its own generator: kept so a resumed CUDA run goes on where it was
                 "cuda_rng": torch.cuda.get_rng_state_all() if self.device.type == "cuda" else None}
        partial = self.checkpoints / "state.pt.partial"
        torch.save(state, partial)
        os.replace(partial, self.checkpoints / "state.pt")
        return folder

    def train_step(self, params: list | None = None) -> float:
        """One optimizer step on a sampled batch (the policy in training mode, the backbone's slot on the cache);
        its loss."""
        settings = self.settings
        if params is None:
            params = [p for group in self.optimizer.param_groups for p in group["params"]]
        batch = self.preprocessor(self.data.batch(self.rng, settings.batch_size))
        if self.device.type != "cpu":
            batch = {key: value.to(self.device, non_blocking=True) if torch.is_tensor(value) else value
                     for key, value in batch.items()}
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=settings.bf16):
            loss, _ = self.policy.forward(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, GRAD_CLIP_NORM)
        self.optimizer.step()
        self.step += 1
        return loss.item()

    def train(self, progress: bool = True) -> Path | None:
        settings = self.settings
        if self.step >= settings.steps:
            print(f"nothing to do: {self.out} is at step {self.step} of {settings.steps}")
            return None
        self._backbone_slot(cached=True)
        self.policy.train()
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        bar = tqdm(total=settings.steps, initial=self.step, desc="ACT", unit="step", disable=not progress)
        losses, started, last = [], time.monotonic(), None
        while self.step < settings.steps:
            losses.append(self.train_step(params))
            bar.update(1)
            if self.step % 50 == 0:
                bar.set_postfix(l1=f"{np.mean(losses[-50:]):.3f}")
            if self.step % settings.save_every == 0 or self.step == settings.steps:
                self.history.append({"step": self.step, "l1": float(np.mean(losses)) if losses else None,
                                     "seconds": round(time.monotonic() - started, 1)})
                losses, started = [], time.monotonic()
                last = self.save()
        bar.close()
        self._backbone_slot(cached=False)
        return last


def average_checkpoints(models: list[Path], out: Path) -> Path:
    """A pretrained_model folder at `out` whose weights are the mean of `models`' (same architecture; the frozen
    backbone is the same in all of them), everything else (config, processors) the newest's. Returns `out`."""
    from safetensors.torch import load_file, save_file

    if len(models) < 2:
        raise ValueError(f"averaging takes at least two checkpoints, got {len(models)}")
    states = [load_file(str(Path(model) / "model.safetensors")) for model in models]
    keys = set(states[0])
    for model, state in zip(models, states, strict=True):
        if set(state) != keys or any(state[k].shape != states[0][k].shape for k in keys):
            raise ValueError(f"{model} is not the same architecture as {models[0]}: cannot average them")
    mean = {key: (torch.stack([state[key].to(torch.float64) for state in states]).mean(0).to(states[0][key].dtype)
                  if states[0][key].is_floating_point() else states[-1][key]) for key in keys}
    out = Path(out)
    scratch = out.with_name(out.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(models[-1], scratch)
    save_file(mean, str(scratch / "model.safetensors"), metadata={"format": "pt"})
    about = json.loads((scratch / SETTINGS_FILE).read_text()) if (scratch / SETTINGS_FILE).is_file() else {}
    about["averaged"] = [str(Path(model).resolve()) for model in models]
    (scratch / SETTINGS_FILE).write_text(json.dumps(about, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(scratch, out)
    return out


def average_last(out: Path, steps: int, count: int) -> Path:
    """OUT/average/pretrained_model: the mean of the run's newest `count` checkpoints up to `steps` (the run saves
    every --save-every steps and at its last, so with steps not a multiple of save_every the last two are closer).
    On the image-less run of the recipe's data the last three averaged took 19/100 to 37/100 on seeds 2000-2099
    (models/act_image_less_avg/README.md). FileNotFoundError when the checkpoint at `steps` or fewer than
    `count` are there."""
    folder = Path(out) / "checkpoints"
    saved = sorted(int(path.parent.name) for path in folder.glob("[0-9]" * 6 + "/pretrained_model")
                   if (path / "model.safetensors").is_file() and int(path.parent.name) <= steps)
    if not saved or saved[-1] != steps:
        raise FileNotFoundError(f"cannot average the last {count} checkpoints: no checkpoint at step {steps} "
                                f"({folder / f'{steps:06d}' / 'pretrained_model'} not there)")
    if len(saved) < count:
        raise FileNotFoundError(f"cannot average the last {count} checkpoints: {folder} holds {len(saved)} up to "
                                f"step {steps} ({', '.join(map(str, saved))})")
    chosen = [folder / f"{step:06d}" / "pretrained_model" for step in saved[-count:]]
    return average_checkpoints(chosen, Path(out) / "average" / "pretrained_model")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m act_lab.vision.act_train", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--cache", default=None, help="the cache stage's folder (not read with --no-cameras)")
    parser.add_argument("--backbone", default=None,
                        help="the frozen backbone's safetensors (not read with --no-cameras)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=Settings.steps)
    parser.add_argument("--batch-size", type=int, default=Settings.batch_size)
    parser.add_argument("--save-every", type=int, default=Settings.save_every)
    parser.add_argument("--seed", type=int, default=Settings.seed)
    parser.add_argument("--no-environment-state", action="store_true",
                        help="the ablation: no target and request (observation.environment_state) in the policy")
    parser.add_argument("--no-cameras", action="store_true",
                        help="the other ablation: the same data, loop and seed without the camera images (the "
                        "image-less ACT, to measure what the images bring)")
    parser.add_argument("--init-from", default=None,
                        help="start from this pretrained_model of the same data (say the --no-cameras run's): its "
                        "weights where the names match; the backbone stays the pretrained one, the image "
                        "projection new")
    parser.add_argument("--episodes", type=int, default=None,
                        help="only the dataset's first N episodes (the recipe's 240 clean ones, without the pushed "
                        "ones recorded after them); the normalization stays the whole dataset's")
    parser.add_argument("--lr", type=float, default=None,
                        help="AdamW's learning rate (default: the recipe's, 1e-4); with --init-from, a lower one "
                        "continues a finished run at a smaller step (a cool-down)")
    parser.add_argument("--device", default="cpu",
                        help="where the policy trains: cpu (default) or cuda[:N]; the checkpoints load anywhere")
    parser.add_argument("--vae", action="store_true",
                        help="ACT's CVAE on (LeRobot's defaults: 4 encoder layers over the chunk, latent 32, KL "
                        "weight 10); the recipe keeps it off")
    parser.add_argument("--map-dropout", type=float, default=0.0, metavar="P",
                        help="dropout on the cached image maps while training (0: none, the recipe's); the "
                        "checkpoints run the backbone's maps whole")
    parser.add_argument("--camera-dropout", type=float, default=0.0, metavar="P",
                        help="while training, each sample's map of each camera zeroed whole with probability P (0: "
                        "none, the recipe's): the policy also learns to act without the images; the checkpoints "
                        "run every camera")
    parser.add_argument("--dim-model", type=int, default=0, metavar="D",
                        help="ACT's transformer width (0: the recipe's, 256); a multiple of its 8 heads")
    parser.add_argument("--dim-feedforward", type=int, default=0, metavar="F",
                        help="ACT's feed-forward width (0: the recipe's, 1024)")
    parser.add_argument("--bf16", action="store_true",
                        help="the forward pass under bfloat16 autocast (weights, optimizer and checkpoints stay "
                        "float32)")
    parser.add_argument("--temporal-ensemble-coeff", type=float, default=None, metavar="C",
                        help="the checkpoints' config.json says ACT's temporal ensembling with C (n_action_steps 1): "
                        "how they then run in lerobot-eval, act-sim eval and the graph; training is the same "
                        "(models/act_target_tool_yaw runs so, with 0.01)")
    parser.add_argument("--average-last", type=int, default=0, metavar="K",
                        help="then write OUT/average/pretrained_model, the mean of the last K checkpoints' weights "
                        "(K >= 2; the recipe uses 3)")
    args = parser.parse_args(argv)
    if not args.no_cameras and (args.cache is None or args.backbone is None):
        parser.error("a camera ACT needs --cache and --backbone (or --no-cameras: the image-less ACT)")
    if args.average_last == 1 or args.average_last < 0:
        parser.error(f"--average-last {args.average_last}: averaging takes at least two checkpoints (or 0: none)")
    try:  # a bad setting is refused here, before any data loads
        settings = Settings(steps=args.steps, batch_size=args.batch_size, save_every=args.save_every,
                            seed=args.seed, use_environment_state=not args.no_environment_state,
                            use_cameras=not args.no_cameras,
                            init_from=str(Path(args.init_from).resolve()) if args.init_from else None,
                            episodes=args.episodes, lr=args.lr, vae=args.vae, map_dropout=args.map_dropout,
                            camera_dropout=args.camera_dropout, dim_model=args.dim_model,
                            dim_feedforward=args.dim_feedforward, bf16=args.bf16)
        training_device(args.device)
        if args.temporal_ensemble_coeff is not None:
            checked_ensemble_coeff(args.temporal_ensemble_coeff)
    except ValueError as error:
        parser.error(str(error))
    optional = lambda value: Path(value) if value is not None else None  # noqa: E731
    run = Run(Path(args.dataset), optional(args.cache), optional(args.backbone), Path(args.out), settings, args.device,
              ensemble_coeff=args.temporal_ensemble_coeff)
    run.train()
    if args.average_last:
        print(f"averaged: {average_last(Path(args.out), settings.steps, args.average_last)}")


if __name__ == "__main__":
    main()
