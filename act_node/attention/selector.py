"""A trained Lookup network as the target selector: request + objects on the table -> where to reach.

    selector = Selector.load()                                   # models/selector_lookup
    choice = selector.select([("cup", 0.31, 0.62), ("pen", 0.7, 0.2)], "cup")
    choice.target_xy, choice.weights, choice.found

Absence. Attention always averages something, so "is the kind on the table at all" is read from the raw
score of the best-matching object before the softmax. The score is affine in the token (two linear
maps and a dot product with a fixed query), so for each requested kind its range over the whole table
is spanned by the four corners. Calibration puts a per-kind threshold midway between the highest
score any other kind can reach and the lowest score the requested kind can reach; when that gap is
positive (the model card reports it) no position on the table can be misjudged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from act_node.attention.networks import ITEMS, KINDS, TABLE_M, TOKEN_SIZE, Lookup
from act_node.paths import models_dir
from act_node.table_frame import kind_index

DEFAULT_MODEL = "selector_lookup"
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "selector.json"
CORNERS = torch.tensor([[0.0, 0.0], [TABLE_M, 0.0], [0.0, TABLE_M], [TABLE_M, TABLE_M]])  # (4, 2)


@dataclass
class Selection:
    """The selector's answer. `target_xy` is None when the requested kind is judged absent."""

    request: str
    target_xy: tuple[float, float] | None
    weights: np.ndarray  # (objects,), sums to 1 when there is at least one object
    found: bool
    score: float  # best raw score over the objects (-inf on an empty table)
    threshold: float


def tokens_from_objects(objects: Sequence[tuple[str, float, float]]) -> torch.Tensor:
    """[(kind, x, y), ...] in metres in the table frame -> tokens (objects, 10)."""
    tokens = torch.zeros(len(objects), TOKEN_SIZE)
    for row, entry in enumerate(objects):
        if len(entry) != 3:
            raise ValueError(f"object {row}: expected (kind, x, y), got {entry!r}")
        kind, x, y = entry
        tokens[row, kind_index(kind)] = 1.0
        tokens[row, KINDS:] = torch.tensor([float(x), float(y)])
    return tokens


def check_tokens(tokens: torch.Tensor) -> None:
    """Raise ValueError naming the first thing wrong with tokens (objects, 10)."""
    if tokens.ndim != 2 or tokens.shape[1] != TOKEN_SIZE:
        raise ValueError(f"tokens must have shape (objects, {TOKEN_SIZE}), got {tuple(tokens.shape)}")
    if not torch.isfinite(tokens).all():
        rows = torch.nonzero(~torch.isfinite(tokens).all(dim=1)).flatten().tolist()
        raise ValueError(f"tokens contain NaN or inf at rows {rows}")
    kinds = tokens[:, :KINDS]
    one_hot = ((kinds == 0) | (kinds == 1)).all(dim=1) & (kinds.sum(dim=1) == 1)
    if not one_hot.all():
        row = int(torch.nonzero(~one_hot)[0])
        raise ValueError(f"token {row}: kind part must be one-hot over {KINDS} kinds, got {kinds[row].tolist()}")
    position = tokens[:, KINDS:]
    outside = ((position < 0) | (position > TABLE_M)).any(dim=1)
    if outside.any():
        row = int(torch.nonzero(outside)[0])
        raise ValueError(f"token {row}: position {position[row].tolist()} m is off the table [0, {TABLE_M}] m")


class Selector:
    """Answers a request on a scene of any size with (target xy, per-object weights, found)."""

    def __init__(self, network: Lookup, thresholds: torch.Tensor):
        self.network = network.eval()
        self.thresholds = thresholds  # (8,) per requested kind

    # --- persistence -----------------------------------------------------------------------------
    @classmethod
    def load(cls, folder: str | Path | None = None) -> Selector:
        folder = Path(folder) if folder is not None else models_dir() / DEFAULT_MODEL
        weights, config = folder / WEIGHTS_FILE, folder / CONFIG_FILE
        for path in (weights, config):
            if not path.is_file():
                raise FileNotFoundError(f"selector file missing: {path}")
        settings = json.loads(config.read_text())
        if tuple(settings.get("items", ())) != ITEMS:
            raise ValueError(f"{config}: items {settings.get('items')} differ from this code's {list(ITEMS)}")
        network = Lookup(width=int(settings["width"]))
        state = load_file(str(weights))
        try:
            network.load_state_dict(state)
        except RuntimeError as error:
            raise ValueError(f"{weights} does not hold a Lookup of width {settings['width']}: {error}") from None
        thresholds = torch.tensor([settings["thresholds"][kind] for kind in ITEMS])
        return cls(network, thresholds)

    def save(self, folder: str | Path, extra: dict | None = None) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.network.state_dict().items()}, str(folder / WEIGHTS_FILE))
        settings = {"items": list(ITEMS), "width": self.network.width,
                    "thresholds": {kind: float(t) for kind, t in zip(ITEMS, self.thresholds)}, **(extra or {})}
        (folder / CONFIG_FILE).write_text(json.dumps(settings, indent=2) + "\n")

    # --- calibration -----------------------------------------------------------------------------
    @classmethod
    def calibrated(cls, network: Lookup) -> tuple[Selector, dict[str, float]]:
        """A selector with per-kind thresholds from the exact score ranges; also the margin per kind (the
        gap between the two ranges; positive means absence is judged right everywhere on the table)."""
        low, high = score_ranges(network)  # (8 requested, 8 object kinds)
        thresholds, margins = torch.empty(KINDS), {}
        for r in range(KINDS):
            others = torch.cat([high[r, :r], high[r, r + 1:]]).max()
            thresholds[r] = (others + low[r, r]) / 2
            margins[ITEMS[r]] = float(low[r, r] - others)
        return cls(network, thresholds), margins

    # --- answering -------------------------------------------------------------------------------
    def select(self, objects: Sequence[tuple[str, float, float]] | torch.Tensor | np.ndarray,
               request: str) -> Selection:
        """objects: [(kind, x, y), ...] or tokens (objects, 10); request: a kind name."""
        asked = kind_index(request)
        tokens = torch.as_tensor(objects, dtype=torch.float32) if isinstance(objects, (torch.Tensor, np.ndarray)) \
            else tokens_from_objects(objects)
        if tokens.numel() == 0:
            return Selection(request, None, np.zeros(0), False, float("-inf"), float(self.thresholds[asked]))
        check_tokens(tokens)
        copies = int(tokens[:, asked].sum())
        if copies > 1:
            raise ValueError(f"the scene holds {copies} objects of kind {request!r}; the selector needs one at most")
        request_vec = torch.nn.functional.one_hot(torch.tensor([asked]), KINDS).float()
        with torch.no_grad():
            answer, weights, scores = self.network.by_hand(tokens[None], request_vec)
        score, threshold = float(scores[0].max()), float(self.thresholds[asked])
        found = score > threshold
        target = (float(answer[0, 0]), float(answer[0, 1])) if found else None
        return Selection(request, target, weights[0].numpy(), found, score, threshold)


def score_ranges(network: Lookup) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, high), each (8 requested, 8 object kinds): the raw score's range over the whole table."""
    (wq, bq), (wk, bk), _ = network.projections()
    with torch.no_grad():
        queries = network.embed_request(torch.eye(KINDS)) @ wq.T + bq  # (8, 16)
        kinds = torch.eye(KINDS).repeat_interleave(len(CORNERS), 0)  # (32, 8)
        tokens = torch.cat([kinds, CORNERS.repeat(KINDS, 1)], dim=1)  # (32, 10)
        keys = network.embed_object(tokens) @ wk.T + bk  # (32, 16)
        scores = (queries @ keys.T / keys.shape[1] ** 0.5).view(KINDS, KINDS, len(CORNERS))
    return scores.min(dim=2).values, scores.max(dim=2).values


def absence_rates(selector: Selector, scenes_per_count: int = 2000, seed: int = 30_003) -> dict:
    """False "found" on scenes of 1-7 objects without the requested kind, false "absent" on scenes of
    1-8 objects with it; also the miss in cm on the scenes with it. Counts per object number."""
    from act_node.attention.networks import make_scenes

    generator = torch.Generator().manual_seed(seed)
    rates = {"false_found": {}, "false_absent": {}, "miss_cm_by_objects": {}}
    for objects in range(1, KINDS + 1):
        present = make_scenes(scenes_per_count, objects, generator)
        found, answer = _judge(selector, present.tokens, present.request)
        rates["false_absent"][objects] = float((~found).float().mean())
        rates["miss_cm_by_objects"][objects] = float(100 * (answer - present.answers["find"]).norm(dim=1).mean())
        if objects < KINDS:  # draw one object more, then take the requested one away
            scenes = make_scenes(scenes_per_count, objects + 1, generator)
            keep = torch.ones(scenes_per_count, objects + 1, dtype=torch.bool)
            keep[torch.arange(scenes_per_count), scenes.asked] = False
            absent_tokens = scenes.tokens[keep].view(scenes_per_count, objects, TOKEN_SIZE)
            found, _ = _judge(selector, absent_tokens, scenes.request)
            rates["false_found"][objects] = float(found.float().mean())
    return rates


def _judge(selector: Selector, tokens: torch.Tensor, request: torch.Tensor):
    """Batched select(): found (N,) and answer (N, 2) for tokens (N, objects, 10), request (N, 8)."""
    with torch.no_grad():
        answer, _, scores = selector.network.by_hand(tokens, request)
    threshold = selector.thresholds[request.argmax(dim=1)]
    return scores.max(dim=1).values > threshold, answer
