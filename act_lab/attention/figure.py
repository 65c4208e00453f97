"""The lab picture: the table from above, a line from the request to each object as thick as its weight,
the network's answer as a dot and the true position as a ring. Lookup on "find" in one picture, and one panel per
layer of the two-layer Transformer on "nearest" (weights averaged over its two heads): two PNGs."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from act_node.attention.networks import ITEMS, KINDS, TABLE_M, Lookup, Transformer  # noqa: E402

REQUEST_BOX = (0.5 * TABLE_M, -0.12 * TABLE_M)  # where the request is drawn, just below the table edge
MAX_LINE_PT = 9.0  # line width for a weight of 1


def draw_panel(ax, tokens: torch.Tensor, request: int, weights: torch.Tensor, answer: torch.Tensor,
               truth: torch.Tensor, title: str) -> None:
    """tokens (objects, 10), weights (objects,), answer and truth (2,) in metres."""
    ax.add_patch(plt.Rectangle((0, 0), TABLE_M, TABLE_M, facecolor="#f4efe6", edgecolor="#8a7a60"))
    for token, weight in zip(tokens, weights.tolist()):
        x, y = token[KINDS:].tolist()
        ax.plot([REQUEST_BOX[0], x], [REQUEST_BOX[1], y], color="#d1495b", alpha=0.8,
                linewidth=max(MAX_LINE_PT * weight, 0.3), solid_capstyle="round", zorder=2)
        ax.plot(x, y, "s", color="#555", markersize=6, zorder=3)
        ax.annotate(f"{ITEMS[int(token[:KINDS].argmax())]} {weight:.2f}", (x, y), xytext=(5, 5),
                    textcoords="offset points", fontsize=8, zorder=5)
    ax.plot(*truth.tolist(), "o", markersize=16, markerfacecolor="none", markeredgecolor="#2a9d8f",
            markeredgewidth=2, zorder=4, label="true position")
    ax.plot(*answer.tolist(), "o", color="#1f6feb", markersize=7, zorder=6, label="answer")
    ax.text(*REQUEST_BOX, f"request: {ITEMS[request]}", ha="center", va="center", fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "#d1495b"})
    miss = 100 * (answer - truth).norm().item()
    ax.set_title(f"{title}\nmiss {miss:.1f} cm", fontsize=10)
    ax.set_xlim(-0.05, TABLE_M + 0.05)
    ax.set_ylim(REQUEST_BOX[1] - 0.06, TABLE_M + 0.05)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")


def lookup_picture(tokens: torch.Tensor, request: int, truth: torch.Tensor, lookup: Lookup, out: Path) -> Path:
    """Lookup on "find" for one scene (tokens (objects, 10)) and request index; writes a PNG."""
    with torch.no_grad():
        answer, weights = lookup.answer(tokens[None], _one_hot(request))
    fig, ax = plt.subplots(figsize=(5.4, 5.8))
    draw_panel(ax, tokens, request, weights[0], answer[0], truth, f'Lookup, "find the {ITEMS[request]}"')
    ax.legend(loc="upper right", fontsize=8)
    return _save(fig, out)


def transformer_picture(tokens: torch.Tensor, request: int, truth: torch.Tensor, transformer: Transformer,
                        out: Path) -> Path:
    """One panel per layer of a Transformer on "nearest": what the request token attends to."""
    with torch.no_grad():
        answer = transformer(tokens[None], _one_hot(request))
        per_layer = transformer.request_attention(tokens[None], _one_hot(request))
    fig, axes = plt.subplots(1, len(per_layer), figsize=(5.4 * len(per_layer), 5.8), squeeze=False)
    for layer, (ax, weights) in enumerate(zip(axes[0], per_layer), start=1):
        # place 0 is the request token itself; the lines show the objects' shares
        draw_panel(ax, tokens, request, weights[0, 1:], answer[0], truth,
                   f'Transformer layer {layer}/{len(per_layer)}, "nearest to the {ITEMS[request]}"\n'
                   f"(the request token keeps {weights[0, 0].item():.2f} for itself)")
    axes[0, 0].legend(loc="upper right", fontsize=8)
    return _save(fig, out)


def _one_hot(request: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor([request]), KINDS).float()  # (1, 8)


def _save(fig, out: Path) -> Path:
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
