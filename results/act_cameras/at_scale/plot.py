"""at_scale_10k.png: the three 10,000-step policies of results/act_cameras ("At scale", "Dropout on the image maps")
on the same two seed sets, from the reports beside this file.

    .venv/bin/python results/act_cameras/at_scale/plot.py
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).parent
RUNS = [("cameras, no dropout\n(mean 8-10k)", "cameras_avg_8-10k"),
        ("cameras, map dropout 0.5\n(mean 8-10k)", "map_dropout_avg_8-10k"),
        ("image-less\n(mean 7-9k)", "image_less_avg_7-9k")]
SETS = [("unseen 1000-1049", "_1000_50.json"), ("its training scenes 10000-10049", "_10000_50_training_scenes.json")]


def main() -> None:
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.38
    for j, (label, suffix) in enumerate(SETS):
        reports = [json.loads((HERE / (stem + suffix)).read_text()) for _, stem in RUNS]
        value = np.array([r["success_rate"] for r in reports]) * 100
        low = np.array([r["success_ci95"][0] for r in reports]) * 100
        high = np.array([r["success_ci95"][1] for r in reports]) * 100
        x = np.arange(len(RUNS)) + (j - 0.5) * width
        ax.bar(x, value, width, label=label, yerr=[value - low, high - value], capsize=4,
               color=["#4C72B0", "#DD8452"][j])
        for xi, vi, n in zip(x, value, [r["episodes"] for r in reports], strict=True):
            ax.text(xi + 0.04, vi + 1.0, f"{round(vi * n / 100)}/{n}", ha="left", va="bottom", fontsize=8)
    ax.set_xticks(np.arange(len(RUNS)), [r[0] for r in RUNS], fontsize=9)
    ax.set_ylabel("success (95% interval)")
    ax.set_ylim(0, 100)
    ax.set_title("Camera ACT at batch 64, 10,000 steps, 4 objects: the same 360 demonstrations", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(HERE / "at_scale_10k.png", dpi=110)


if __name__ == "__main__":
    main()
