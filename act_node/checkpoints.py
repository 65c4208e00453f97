"""Reading what a checkpoint or a dataset says about itself, without torch: each file parsed once a process.

    <pretrained_model>/config.json        LeRobot's policy config: the cameras (H, W) it takes, n_action_steps
    <pretrained_model>/train_config.json  lerobot-train's config: the dataset root it was trained on
    <pretrained_model>/act_node_renderer.json, <dataset>/meta/act_node_renderer.json
                                          which renderer drew the training images (RENDERER_FILE)

The launch description, GraphConfig, the policy node and `act-sim eval` all ask these questions about the
same folder; `read_json` keeps each file's parse (keyed by its path, size and modification time), so a file
read for the cameras is not parsed again for n_action_steps, and a file that changes is read afresh.
Every reader names the file and what was wrong with it.
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import lru_cache
from pathlib import Path

from act_node.table_frame import RENDERERS, environment_layout

OBS_IMAGES = "observation.images"  # LeRobot's key prefix (lerobot.utils.constants), without importing lerobot
# Which renderer drew a dataset's images: meta/<RENDERER_FILE> in a dataset (act-sim record writes it) and
# <RENDERER_FILE> in a checkpoint's pretrained_model folder (act-sim train copies it there from the dataset).
RENDERER_FILE = "act_node_renderer.json"


def read_json(path: str | Path) -> dict:
    """The parsed content of a JSON file, parsed once for as long as the file stays the same;
    OSError or ValueError (json's) as json.loads and open raise them."""
    path = Path(path).resolve()
    stat = path.stat()
    return _parsed(path, stat.st_size, stat.st_mtime_ns)


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, hex: which weights a reader or an evaluation ran."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@lru_cache(maxsize=64)
def _parsed(path: Path, _size: int, _mtime_ns: int) -> dict:
    return json.loads(path.read_text())


# a lerobot-train run folder keeps its pretrained_model folders here, the newest under "last"
PRETRAINED_MODEL_PLACES = ("pretrained_model", "checkpoints/last/pretrained_model", "last/pretrained_model")


def check_checkpoint_folder(checkpoint: str | Path, argument: str = "checkpoint:=") -> Path:
    """The folder, when it is a LeRobot pretrained_model folder (it holds config.json); else ValueError in one line
    naming what was given and the folder expected: a missing folder, a file, or a lerobot-train run folder (or a
    checkpoints/<step> folder) given instead of its pretrained_model."""
    path = Path(checkpoint).expanduser()
    expected = "a LeRobot pretrained_model folder (config.json, model.safetensors, the processors)"
    if not path.exists():
        raise ValueError(f"{argument}{checkpoint}: no such folder; expected {expected}, e.g. "
                         f"<lerobot-train output_dir>/checkpoints/last/pretrained_model")
    if not path.is_dir():
        raise ValueError(f"{argument}{checkpoint} is a file; expected {expected}")
    if (path / "config.json").is_file():
        return path
    for place in PRETRAINED_MODEL_PLACES:
        if (path / place / "config.json").is_file():
            raise ValueError(f"{argument}{checkpoint} is not a pretrained_model folder (no config.json) but holds "
                             f"one: give {argument}{path / place}")
    raise ValueError(f"{argument}{checkpoint} holds no config.json; expected {expected}, e.g. "
                     f"<lerobot-train output_dir>/checkpoints/last/pretrained_model")


def checkpoint_cameras(checkpoint: str | Path) -> dict[str, tuple[int, int]]:
    """{camera: (H, W)} a checkpoint was trained on, from its config.json; ValueError if unreadable."""
    config = Path(checkpoint) / "config.json"
    try:
        features = read_json(config)["input_features"]
        return {key.rsplit(".", 1)[1]: (int(f["shape"][1]), int(f["shape"][2]))
                for key, f in features.items() if key.startswith(f"{OBS_IMAGES}.")}
    except (OSError, KeyError, ValueError, IndexError, TypeError) as error:
        raise ValueError(f"cannot read the cameras from {config}: {error!r}") from None


def readable_checkpoint_cameras(checkpoint: str | Path) -> dict[str, tuple[int, int]] | None:
    """checkpoint_cameras, or None when the config.json does not read (ChunkPolicy.load then names what is wrong
    with the folder); {} is a checkpoint that takes no images."""
    try:
        return checkpoint_cameras(checkpoint)
    except ValueError:
        return None


def checkpoint_env_state_size(checkpoint: str | Path) -> int | None:
    """How many numbers the checkpoint's observation.environment_state holds (None: it takes none), from its
    config.json; ValueError if unreadable."""
    config = Path(checkpoint) / "config.json"
    try:
        feature = read_json(config)["input_features"].get("observation.environment_state")
        return None if feature is None else int(feature["shape"][0])
    except (OSError, KeyError, ValueError, IndexError, TypeError, AttributeError) as error:
        raise ValueError(f"cannot read observation.environment_state from {config}: {error!r}") from None


def checkpoint_layout(checkpoint: str | Path) -> str | None:
    """The checkpoint's environment_state layout (act_node.table_frame.ENV_LAYOUTS) by its size; None when it takes
    none, or when its config does not read or its size is none of the layouts (loading it then names what is
    wrong)."""
    try:
        size = checkpoint_env_state_size(checkpoint)
        return None if size is None else environment_layout(size)
    except ValueError:
        return None


def checkpoint_n_action_steps(checkpoint: str | Path) -> int:
    config = Path(checkpoint) / "config.json"
    try:
        return int(read_json(config)["n_action_steps"])
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise ValueError(f"cannot read n_action_steps from {config}: {error}") from None


def checkpoint_ensemble_coeff(checkpoint: str | Path) -> float | None:
    """The checkpoint's `temporal_ensemble_coeff` (None: it runs its chunks n_action_steps at a time), from its
    config.json; ValueError if unreadable or not a finite number (ACT weighs the i-th prediction for a step
    exp(-coeff * i), the oldest i = 0: a coefficient below 0 favours the newer ones)."""
    config = Path(checkpoint) / "config.json"
    try:
        coeff = read_json(config).get("temporal_ensemble_coeff")
        coeff = None if coeff is None else float(coeff)
    except (OSError, ValueError, TypeError, AttributeError) as error:
        raise ValueError(f"cannot read temporal_ensemble_coeff from {config}: {error}") from None
    if coeff is not None and not math.isfinite(coeff):
        raise ValueError(f"{config}: temporal_ensemble_coeff must be a finite number, got {coeff}")
    return coeff


def recorded_renderer(folder: str | Path) -> str | None:
    """The renderer named in folder/RENDERER_FILE, or None when there is no such file; ValueError if it names
    none of RENDERERS or does not read."""
    path = Path(folder) / RENDERER_FILE
    if not path.is_file():
        return None
    try:
        renderer = read_json(path)["renderer"]
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


def training_dataset_root(checkpoint: str | Path) -> str | None:
    """The local dataset root a lerobot-train checkpoint was trained on (train_config.json), if it names one."""
    try:
        root = read_json(Path(checkpoint) / "train_config.json")["dataset"]["root"]
    except (OSError, KeyError, ValueError, TypeError):
        return None
    return str(root) if root else None


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
