"""by_kind.png: how each kind's episodes end, the DART checkpoint against the grasp one, seeds 2100-2399 with the
objects read from the cameras (the card's reports).

    .venv/bin/python results/act_grasp_layout/figure.py
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from act_node.report import load_report  # noqa: E402
from act_node.tabletop.outcomes import MODE_TITLES, MODES  # noqa: E402

HERE = Path(__file__).parent
KINDS = ("pen", "key", "box", "cube", "cup", "toy", "ball", "can")
COLOURS = dict(zip(MODES, ("#4caf50", "#1e88e5", "#8e24aa", "#e53935", "#fb8c00", "#6d4c41", "#f06292", "#757575",
                            "#bdbdbd", "#212121")))
RUNS = (("models/act_target_tool_yaw_dart", HERE.parent / "act_dart/card/dart_cameras_2100_300_4.json"),
        ("models/act_target_tool_yaw_grasp", HERE / "card/grasp_cameras_2100_300_4.json"))


def main() -> None:
    figure, axes = plt.subplots(1, 2, figsize=(12, 5.2), sharey=True)
    for axis, (label, path) in zip(axes, RUNS):
        episodes = load_report(path)["per_episode"]
        by_kind = {kind: Counter(e["outcome"] for e in episodes if e["task"].split()[-1] == kind) for kind in KINDS}
        bottom = [0.0] * len(KINDS)
        for mode in MODES:  # every way an episode ends (act_node.tabletop.outcomes), so each bar reaches 1
            share = [by_kind[k][mode] / max(sum(by_kind[k].values()), 1) for k in KINDS]
            axis.bar(KINDS, share, bottom=bottom, color=COLOURS[mode], label=MODE_TITLES[mode])
            bottom = [b + s for b, s in zip(bottom, share)]
        picked = sum(e["success"] for e in episodes)
        axis.set_title(f"{label}\n{picked}/{len(episodes)} picked, seeds 2100-2399, scene:=cameras", fontsize=10)
        axis.set_ylim(0, 1)
    axes[0].set_ylabel("share of the kind's episodes")
    handles, labels = axes[1].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=5, fontsize=8)
    figure.tight_layout(rect=(0, 0.12, 1, 1))
    figure.savefig(HERE / "by_kind.png", dpi=110)


if __name__ == "__main__":
    main()
