"""warm_start_by_kind.png: the image-less models/act_target_tool and the camera ACTs warm-started from it, on the 300
seeds 2100-2399 (4 objects), overall and by requested kind, from the reports beside this file (each run that has
one; results/act_cameras, "A warm start from the image-less ACT").

    .venv/bin/python results/act_cameras/warm_start/plot.py
"""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).parent
RUNS = [("image-less models/act_target_tool, ensembled", "image_less_act_target_tool_ensembled_2100_300.json"),
        ("cameras, warm start + map dropout 0.5, 6,000 steps, ensembled",
         "warm_map_dropout_6k_ensembled_2100_300.json"),
        ("cameras, warm start + map and camera dropout 0.5, 3,000 steps, ensembled",
         "warm_camera_dropout_3k_ensembled_2100_300.json")]
COLORS = ["#4C72B0", "#DD8452", "#55A868"]


def kind(episode: dict) -> str:
    return episode["task"].split()[-1]


def main() -> None:
    runs = [(label, json.loads((HERE / name).read_text())) for label, name in RUNS if (HERE / name).is_file()]
    kinds = sorted({kind(e) for _, report in runs for e in report["per_episode"]})
    groups = ["all", *kinds]
    fig, ax = plt.subplots(figsize=(10, 4.4))
    width = 0.8 / len(runs)
    for i, (label, report) in enumerate(runs):
        counts = []
        for group in groups:
            chosen = [e for e in report["per_episode"] if group == "all" or kind(e) == group]
            counts.append((sum(e["success"] for e in chosen), len(chosen)))
        value = np.array([s / n * 100 for s, n in counts])
        x = np.arange(len(groups)) + (i - (len(runs) - 1) / 2) * width
        ax.bar(x, value, width, label=label, color=COLORS[i])
        for xi, vi, (s, n) in zip(x, value, counts, strict=True):
            ax.text(xi, vi + 1.0, f"{s}/{n}", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(np.arange(len(groups)), groups)
    ax.set_ylabel("success, % of the episodes")
    ax.set_ylim(0, 110)
    ax.set_title("Seeds 2100-2399, 4 objects: what the images add to the image-less ACT they start from", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(HERE / "warm_start_by_kind.png", dpi=110)


if __name__ == "__main__":
    main()
