"""The encoder's networks: ACT's image backbone as a trainable trunk, and the heads that read its layer4 map.

    image (N, 3, 96, 128) float in [0, 1]        as LeRobot feeds ACT with VISUAL normalization IDENTITY
      -> trunk: torchvision resnet18, layer4     exactly ACT's `model.backbone` (IntermediateLayerGetter ->
                                                 "feature_map"), with BatchNorm2d where ACT has FrozenBatchNorm2d
      -> map (N, 512, 3, 4)                      ACT projects each of these 12 cells to one transformer token
      -> grid head, per cell and kind:           the cell's logit (the kind's centre falls in it), the centre's
                                                 place in the cell (2), the yaw pair (2)
      -> pooled head (the whole map), per kind:  the absent logit (the 13th class beside the 12 cells), the
                                                 wrist camera's offset of the grasp point from the tcp (3), the
                                                 between-the-jaws logit
The grid head keeps what the labels ask for in the cells, where ACT's transformer reads it.
Losses and metrics take the label dict of frames.ImageSet (numpy there, tensors here).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torchvision
from torch import nn
from torch.nn import functional as F  # noqa: N812
from torchvision.models._utils import IntermediateLayerGetter

from act_lab.vision.labels import KIND_NAMES, YAW_TURNS

KINDS = len(KIND_NAMES)
GRID_OUTPUTS = 5  # cell logit, centre (2), yaw (2)
POOLED_OUTPUTS = 5  # absent logit, offset (3), between logit
OFFSET_SCALE_M = 0.05  # offsets are regressed in units of 5 cm
LOSS_WEIGHTS = dict(cell=1.0, centre=2.0, yaw=1.0, offset=1.0, between=0.5)
YAW_METRIC_KINDS = ("pen", "key")
WRIST = 1  # frames.CAMERAS.index("wrist")


def act_trunk(dilation: bool = False, norm_layer: type[nn.Module] = nn.BatchNorm2d) -> IntermediateLayerGetter:
    """ACT's backbone as lerobot's modeling_act.ACT builds it (resnet18, no pretrained weights), with `norm_layer`
    in place of FrozenBatchNorm2d; returns {"feature_map": layer4 (N, 512, H/32, W/32)}."""
    resnet = torchvision.models.resnet18(weights=None, replace_stride_with_dilation=[False, False, dilation],
                                         norm_layer=norm_layer)
    return IntermediateLayerGetter(resnet, return_layers={"layer4": "feature_map"})


def feature_map_size(image_size: tuple[int, int], dilation: bool = False) -> tuple[int, int]:
    """(h, w) of layer4 for images of `image_size`: resnet's stride 32 (16 with the final dilation)."""
    stride = 16 if dilation else 32
    size = []
    for pixels in image_size:
        for _ in range(int(math.log2(stride))):  # conv1, maxpool, layer2, layer3 (, layer4): each k3/k7 s2 p1/p3
            pixels = (pixels - 1) // 2 + 1
        size.append(pixels)
    return size[0], size[1]


class Heads(nn.Module):
    """Grid head and pooled head over a layer4 map (N, 512, h, w)."""

    def __init__(self, map_size: tuple[int, int], channels: int = 512, width: int = 256):
        super().__init__()
        self.map_size = tuple(map_size)
        cells = self.map_size[0] * self.map_size[1]
        self.grid = nn.Sequential(nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(width, KINDS * GRID_OUTPUTS, 1))
        self.pooled = nn.Sequential(nn.Conv2d(channels, 64, 1), nn.ReLU(), nn.Flatten(),
                                    nn.Linear(64 * cells, width), nn.ReLU(), nn.Linear(width, KINDS * POOLED_OUTPUTS))

    def forward(self, feature_map: torch.Tensor) -> dict[str, torch.Tensor]:
        n, _, h, w = feature_map.shape
        if (h, w) != self.map_size:
            raise ValueError(f"feature map is {h}x{w}, the heads were built for {self.map_size[0]}x{self.map_size[1]}")
        grid = self.grid(feature_map).view(n, KINDS, GRID_OUTPUTS, h * w).transpose(2, 3)  # (N, 8, cells, 5)
        pooled = self.pooled(feature_map).view(n, KINDS, POOLED_OUTPUTS)  # (N, 8, 5)
        return {
            "classes": torch.cat([grid[..., 0], pooled[..., :1]], dim=2),  # (N, 8, cells + 1): cells, then absent
            "centre": torch.sigmoid(grid[..., 1:3]),  # (N, 8, cells, 2) place in the cell, 0-1
            "yaw": torch.tanh(grid[..., 3:5]),  # (N, 8, cells, 2) (cos k phi, sin k phi), not normalised
            "offset": pooled[..., 1:4],  # (N, 8, 3) in OFFSET_SCALE_M
            "between": pooled[..., 4],  # (N, 8) logit
        }


class Encoder(nn.Module):
    """Trunk and heads: images (N, 3, H, W) in [0, 1] -> the heads' outputs."""

    def __init__(self, image_size: tuple[int, int], dilation: bool = False):
        super().__init__()
        self.image_size = tuple(image_size)
        self.dilation = dilation
        self.trunk = act_trunk(dilation)
        self.heads = Heads(feature_map_size(image_size, dilation))

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.heads(self.trunk(images)["feature_map"])  # map (N, 512, 3, 4) at 96x128


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, 3, H, W) float32 in [0, 1], channels-last in memory (faster convolutions)."""
    return torch.from_numpy(images).permute(0, 3, 1, 2).float().div_(255.0).contiguous(
        memory_format=torch.channels_last)


def targets(labels: dict[str, np.ndarray], camera: np.ndarray, image_size: tuple[int, int],
            map_size: tuple[int, int]) -> dict[str, torch.Tensor]:
    """What the heads should say, from a batch of labels (frames.ImageSet.labels rows) and camera indices."""
    h, w = map_size
    cell_h, cell_w = image_size[0] / h, image_size[1] / w
    present = torch.from_numpy(labels["present"])  # (N, 8)
    centre = torch.from_numpy(labels["centre_px"]).float()  # (N, 8, 2) (u, v)
    row = (centre[..., 1] / cell_h).floor().clamp(0, h - 1)
    column = (centre[..., 0] / cell_w).floor().clamp(0, w - 1)
    cell = (row * w + column).long()  # (N, 8)
    in_cell = torch.stack([centre[..., 0] / cell_w - column, centre[..., 1] / cell_h - row], dim=-1)  # (N, 8, 2)
    wrist = torch.from_numpy(camera == WRIST)[:, None].expand_as(present)  # (N, 8)
    return {
        "classes": torch.where(present, cell, torch.full_like(cell, h * w)),  # (N, 8) cell or absent (h * w)
        "present": present, "cell": cell, "in_cell": in_cell, "centre_px": centre,
        "yaw": torch.from_numpy(labels["yaw"]).float(), "yaw_valid": torch.from_numpy(labels["yaw_valid"]),
        "offset": torch.from_numpy(labels["offset_m"]).float() / OFFSET_SCALE_M,
        "offset_valid": torch.from_numpy(labels["offset_valid"]) & wrist,
        "between": torch.from_numpy(labels["between"]).float(), "wrist": wrist,
        "cell_size": torch.tensor([cell_w, cell_h]), "columns": torch.tensor(w),
    }


def _at_cell(values: torch.Tensor, cell: torch.Tensor) -> torch.Tensor:
    """values (N, 8, cells, k) at each (image, kind)'s cell (N, 8) -> (N, 8, k)."""
    return values.gather(2, cell[..., None, None].expand(*cell.shape, 1, values.shape[-1])).squeeze(2)


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1)


def losses(outputs: dict[str, torch.Tensor], target: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each term (a scalar), and "total": their sum with LOSS_WEIGHTS."""
    present = target["present"].float()
    yaw_mask = target["yaw_valid"].float()[..., None]
    terms = {
        "cell": F.cross_entropy(outputs["classes"].flatten(0, 1), target["classes"].flatten()),
        "centre": _masked_mean((_at_cell(outputs["centre"], target["cell"]) - target["in_cell"]).abs(),
                               present[..., None]) / 2,
        "yaw": _masked_mean((_at_cell(outputs["yaw"], target["cell"]) - target["yaw"]).square(), yaw_mask) / 2,
        "offset": _masked_mean(F.smooth_l1_loss(outputs["offset"], target["offset"], reduction="none", beta=0.2),
                               target["offset_valid"].float()[..., None]) / 3,
        "between": _masked_mean(F.binary_cross_entropy_with_logits(outputs["between"], target["between"],
                                                                   reduction="none"), target["wrist"].float()),
    }
    terms["total"] = sum(LOSS_WEIGHTS[name] * value for name, value in terms.items())
    return terms


class Metrics:
    """What a reader wants from a validation pass, accumulated over batches:
    presence_acc   (image, kind) pairs whose present/absent call is right (absent: the 13th class wins); beside
                   it present_share (the share present), presence_recall and presence_precision
    cell_acc       of the present ones, the centre's cell found
    centre_px      of the present ones, pixels between the true centre and the predicted one (the best cell's)
    yaw_deg        pens' and keys' yaw error where labelled (degrees, modulo their symmetry), at the true cell
    offset_mm      wrist images, kinds seen: the grasp point's offset from the tcp, error in millimetres
    between_acc    wrist images, every kind: between the jaws or not
    and presence_acc / centre_px by camera."""

    def __init__(self):
        self.sums: dict[str, float] = {}
        self.counts: dict[str, float] = {}

    def _add(self, name: str, values: torch.Tensor, mask: torch.Tensor) -> None:
        mask = mask.float()
        self.sums[name] = self.sums.get(name, 0.0) + float((values.float() * mask).sum())
        self.counts[name] = self.counts.get(name, 0.0) + float(mask.sum())

    @torch.no_grad()
    def update(self, outputs: dict[str, torch.Tensor], target: dict[str, torch.Tensor], camera: np.ndarray) -> None:
        classes = outputs["classes"]  # (N, 8, cells + 1)
        cells = classes.shape[-1] - 1
        present = target["present"]
        called = classes.argmax(-1) != cells
        best = classes[..., :cells].argmax(-1)  # (N, 8)
        cell_w, cell_h = target["cell_size"].tolist()
        row, column = best // int(target["columns"]), best % int(target["columns"])
        place = _at_cell(outputs["centre"], best)  # (N, 8, 2)
        predicted = torch.stack([(column + place[..., 0]) * cell_w, (row + place[..., 1]) * cell_h], -1)
        error_px = (predicted - target["centre_px"]).norm(dim=-1)  # (N, 8)
        everything = torch.ones_like(present)
        self._add("presence_acc", called == present, everything)
        self._add("present_share", present, everything)  # what always answering "absent" would score: 1 - this
        self._add("presence_recall", called, present)
        self._add("presence_precision", present, called)
        self._add("cell_acc", best == target["cell"], present)
        self._add("centre_px", error_px, present)
        for index, name in enumerate(("front", "wrist")):
            on = torch.from_numpy(camera == index)[:, None].expand_as(present)
            self._add(f"{name}_presence_acc", called == present, on)
            self._add(f"{name}_centre_px", error_px, present & on)
        turns = torch.from_numpy(YAW_TURNS).float()  # (8,)
        yaw = _at_cell(outputs["yaw"], target["cell"])
        angle = torch.atan2(yaw[..., 1], yaw[..., 0]) - torch.atan2(target["yaw"][..., 1], target["yaw"][..., 0])
        angle = torch.atan2(angle.sin(), angle.cos()).abs() / turns.clamp(min=1)  # (N, 8) radians of yaw
        for name in YAW_METRIC_KINDS:
            kind = torch.zeros_like(present)
            kind[:, KIND_NAMES.index(name)] = True
            self._add("yaw_deg", torch.rad2deg(angle), target["yaw_valid"] & kind)
            self._add(f"{name}_yaw_deg", torch.rad2deg(angle), target["yaw_valid"] & kind)
        offset_mm = (outputs["offset"] - target["offset"]).norm(dim=-1) * OFFSET_SCALE_M * 1000
        self._add("offset_mm", offset_mm, target["offset_valid"])
        self._add("between_acc", (outputs["between"] > 0) == target["between"].bool(), target["wrist"])
        self._add("between_recall", outputs["between"] > 0, target["wrist"] & target["between"].bool())

    def result(self) -> dict[str, float]:
        return {name: round(self.sums[name] / self.counts[name], 4) if self.counts[name] else None
                for name in self.sums}

