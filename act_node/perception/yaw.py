"""The yaw reader: the requested object's yaw at reset, read from the front and wrist cameras.

What the image-less ACT lacks for pens, keys and boxes is how they lie (results/act_yaw). The reader gives the
ACT that yaw from what the real arm has too, its cameras:

  the recipe's frozen encoder (models/tabletop_encoder: LeRobot ACT's ResNet-18, pretrained on this table-top)
  turns each camera's image (96x128, as `act-sim record --height 96 --width 128` draws it) into its layer4 map
  (512 x 3 x 4); a small head shared over the map's cells gives, in every cell, per kind a score (is the kind
  here) and a yaw; a kind's answer is its yaws averaged with the softmax of its scores over the cells of both
  cameras, plus a learned embedding per camera and cell (the image's angle becomes the table's).

The answer is the environment_state layout "target_tool_yaw"'s last two numbers (act_node.table_frame): the
requested kind's (cos k*yaw, sin k*yaw), k its symmetry (a pen 2: both ends take the same grasp; the cube 4),
zeros for a round kind. Read once an episode, at its first observation, before anything moved.

    reader = YawReader.load()                                  # models/yaw_reader
    reader.read({"front": rgb, "wrist": rgb}, "pen")           # (2,) float32

act_lab.vision.yaw makes one (`act-lab yaw scenes`, `act-lab yaw train`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from torch import nn

from act_node.checkpoints import file_sha256
from act_node.paths import models_dir
from act_node.perception.backbone import act_backbone, images_to_tensor
from act_node.table_frame import KIND_NAMES, YAW_READER_CAMERAS, YAW_READER_IMAGE_SIZE, kind_index

READER_CAMERAS = YAW_READER_CAMERAS
READER_IMAGE_SIZE = YAW_READER_IMAGE_SIZE  # (height, width): the encoder's and the recipe's
DEFAULT_READER = "yaw_reader"
HEAD_FILE = "head.safetensors"
CONFIG_FILE = "reader.json"
MAP_SIZE = (3, 4)  # layer4 of 96x128


def kind_turns(kind: str) -> int:
    """How many grasp directions of the kind are alike in a turn (0: round, no yaw)."""
    from act_node.tabletop.objects import kind as object_kind

    kind_index(kind)  # ValueError naming the kinds
    return int(object_kind(kind).grasp_turns)


def symmetric_yaw(kind: str, yaw: float) -> np.ndarray:
    """(cos k*yaw, sin k*yaw) for a kind of symmetry k; zeros for a round one. (2,) float32."""
    turns = kind_turns(kind)
    if turns == 0:
        return np.zeros(2, np.float32)
    return np.array([math.cos(turns * yaw), math.sin(turns * yaw)], np.float32)


class YawHead(nn.Module):
    """Layer4 maps of both cameras (N, 2, 512, h, w) -> (N, 8, 2): per kind (cos k*yaw, sin k*yaw), not normalized."""

    def __init__(self, map_size: tuple[int, int] = MAP_SIZE, width: int = 128, dropout: float = 0.1):
        super().__init__()
        self.reduce = nn.ModuleList([nn.Conv2d(512, width, 1) for _ in READER_CAMERAS])
        self.place = nn.Parameter(torch.zeros(len(READER_CAMERAS), width, *map_size))
        self.out = nn.Sequential(nn.ReLU(), nn.Dropout(dropout), nn.Conv2d(width, width, 1), nn.ReLU(),
                                 nn.Conv2d(width, len(KIND_NAMES) * 3, 1))

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        cells = []
        for c, reduce in enumerate(self.reduce):
            out = self.out(reduce(maps[:, c].float()) + self.place[c])  # (N, 8 * 3, h, w)
            cells.append(out.reshape(len(out), len(KIND_NAMES), 3, -1))
        cells = torch.cat(cells, -1)  # (N, 8, 3, the cells of both cameras)
        weights = torch.softmax(cells[:, :, 0], -1)
        return (cells[:, :, 1:] * weights[:, :, None]).sum(-1)


class YawReader:
    """The encoder's backbone and the yaw head: camera images at reset -> the requested kind's yaw numbers."""

    def __init__(self, backbone: nn.Module, head: YawHead, folder: Path, about: dict):
        self.backbone, self.head, self.folder, self.about = backbone.eval(), head.eval(), folder, about

    @classmethod
    def load(cls, folder: str | Path | None = None) -> YawReader:
        """models/yaw_reader, or `folder`: reader.json names the backbone (a folder under models/ or a path) and
        its sha256; FileNotFoundError or ValueError naming what is missing or does not match."""
        folder = Path(folder) if folder is not None else models_dir() / DEFAULT_READER
        config_path, head_path = folder / CONFIG_FILE, folder / HEAD_FILE
        for path in (config_path, head_path):
            if not path.is_file():
                raise FileNotFoundError(f"yaw reader {folder}: no {path.name} (expected {CONFIG_FILE} and {HEAD_FILE})")
        try:
            about = json.loads(config_path.read_text())
            named = Path(about["backbone"])
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"yaw reader {folder}: {CONFIG_FILE} does not name its backbone ({error!r})") from None
        backbone_path = named if named.is_absolute() else models_dir() / named
        if not backbone_path.is_file():
            raise FileNotFoundError(f"yaw reader {folder}: its backbone {backbone_path} is missing")
        if about.get("backbone_sha256") and file_sha256(backbone_path) != about["backbone_sha256"]:
            raise ValueError(f"yaw reader {folder} was trained on another backbone than {backbone_path} (sha256 "
                             f"differs): its head reads that backbone's maps only")
        head = YawHead()
        state = load_file(str(head_path))
        expected = {key: tuple(value.shape) for key, value in head.state_dict().items()}
        found = {key: tuple(value.shape) for key, value in state.items()}
        if found != expected:
            raise ValueError(f"yaw reader {folder}: {HEAD_FILE} is not a yaw head (keys or shapes differ: "
                             f"{sorted(set(found.items()) ^ set(expected.items()))[:4]})")
        head.load_state_dict(state)
        return cls(act_backbone(backbone_path), head, folder, about)

    @torch.no_grad()
    def maps(self, images: Mapping[str, np.ndarray]) -> torch.Tensor:
        """{camera: (H, W, 3) uint8} -> (1, 2, 512, 3, 4); ValueError naming a missing or misshapen image. A frame
        of another size than the reader's 96x128 is resized to it first, as LeRobot's processors resize
        (act_node.policy.resized_frame): a camera of any size, with the same field of view, reads the same."""
        from act_node.policy import resized_frame

        tensors = []
        for camera in READER_CAMERAS:
            if camera not in images:
                raise ValueError(f"the yaw reader needs the {camera!r} camera's image; got {sorted(images)}")
            image = np.asarray(images[camera])
            if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
                raise ValueError(f"the yaw reader reads {camera!r} images of (H, W, 3) uint8, got "
                                 f"{image.shape} {image.dtype}")
            tensors.append(images_to_tensor(resized_frame(image, READER_IMAGE_SIZE)[None]))
        return torch.stack([self.backbone(t)["feature_map"] for t in tensors], 1)

    @torch.no_grad()
    def read(self, images: Mapping[str, np.ndarray], request: str) -> np.ndarray:
        """The requested kind's (cos k*yaw, sin k*yaw), unit length; zeros for a round kind. (2,) float32."""
        row = kind_index(request)
        if kind_turns(request) == 0:
            return np.zeros(2, np.float32)
        value = self.head(self.maps(images))[0, row].numpy()
        return (value / max(float(np.linalg.norm(value)), 1e-6)).astype(np.float32)
