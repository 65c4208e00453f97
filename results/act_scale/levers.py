"""Draws levers.png: success on seeds 2100-2399 (300 scenes, 4 objects) of the image-less ACT on the same 360 clean
demonstrations, by what it was given and how long it trained, beside the shipped checkpoints. Reads the act-sim eval
reports named in RUNS (this folder's and results/act_offset's); prints the table the README gives.

    .venv/bin/python results/act_scale/levers.py
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from act_node.evaluate import wilson_interval  # noqa: E402

HERE = Path(__file__).parent
RESULTS = HERE.parent
# (label, report, colour): the CPU runs are 20,000 steps at batch 8 (160k samples); the GPU runs batch 64
RUNS = [
    ("models/act_pick (the default before)", RESULTS / "act_image_less_avg" / "avg_2100_300_4_objects.json", None),
    ("models/act_image_less_avg", RESULTS / "act_image_less_avg" / "avg_2100_300_4_objects.json", "grey"),
    ("target (10), CPU 20k x 8", RESULTS / "act_offset" / "eval10_2100.json", "tab:blue"),
    ("target_tool (13), CPU 20k x 8", RESULTS / "act_offset" / "eval13_2100.json", "tab:orange"),
    ("target (10), GPU 40k x 64", HERE / "gpu10_b64_40k_2100.json", "tab:blue"),
    ("target_tool (13), GPU 9k x 64", HERE / "gpu13_b64_9k_2100.json", "tab:orange"),
    ("target_tool (13), GPU 28k x 64", HERE / "gpu13_b64_28k_2100.json", "tab:orange"),
    ("target_tool (13), GPU 40k x 64", HERE / "gpu13_b64_40k_2100.json", "tab:orange"),
    ("target_tool (13), GPU 37.5k x 8", HERE / "gpu13_b8_37k_2100.json", "tab:orange"),
    ("+ yaw oracle (15, privileged), CPU 20k x 8", RESULTS / "act_offset" / "eval15_2100_yaw_oracle.json", "tab:red"),
    ("+ yaw oracle (15, privileged), GPU 40k x 64", HERE / "gpu15_yaw_b64_40k_2100.json", "tab:red"),
]
ACT_PICK_2100 = (91, 300)  # models/act_pick on the same seeds (results/act_image_less_avg/README.md)
YAW_KINDS = ("pen", "key", "box")


def counts(report: Path) -> tuple[int, int, int, int]:
    """(successes, episodes, successes on pens, keys and boxes, those episodes)."""
    episodes = json.loads(report.read_text())["per_episode"]
    yaw = [e for e in episodes if e["task"].removeprefix("pick up the ") in YAW_KINDS]
    return (sum(e["success"] for e in episodes), len(episodes), sum(e["success"] for e in yaw), len(yaw))


rows = []
for label, report, colour in RUNS:
    if label.startswith("models/act_pick"):
        rows.append((label, *ACT_PICK_2100, None, None, "black"))
    elif report.is_file():
        rows.append((label, *counts(report), colour))
    else:
        print(f"(not measured: {label}, {report.name})")
figure, axes = plt.subplots(figsize=(8.5, 0.42 * len(rows) + 1.4))
for index, (label, wins, total, yaw_wins, yaw_total, colour) in enumerate(rows):
    low, high = (100 * v for v in wilson_interval(wins, total))
    rate = 100 * wins / total
    y = len(rows) - index
    axes.barh(y, rate, color=colour, alpha=0.35 if "CPU" in label else 0.8, height=0.7)
    axes.errorbar(rate, y, xerr=[[rate - low], [high - rate]], fmt="none", ecolor="black", capsize=3, lw=1)
    axes.text(high + 1, y, f"{wins}/{total}", va="center", fontsize=8)
    print(f"| {label} | {wins}/{total}, {rate:.1f}% ({low:.1f}-{high:.1f}%) | "
          + (f"{yaw_wins}/{yaw_total} |" if yaw_total else "|"))
axes.set_yticks(range(len(rows), 0, -1), [row[0] for row in rows], fontsize=8)
axes.set_xlim(0, 100)
axes.axvline(90, color="green", ls="--", lw=1)
axes.text(90.5, 0.6, "the bar: 90%", color="green", fontsize=8)
axes.set_xlabel("success on seeds 2100-2399, 4 objects (%), 95% interval")
axes.set_title("Image-less ACT, the same 360 clean demonstrations: what it is given, how long it trains", fontsize=9)
axes.grid(axis="x", alpha=0.3)
figure.tight_layout()
figure.savefig(HERE / "levers.png", dpi=100)
print(HERE / "levers.png")
