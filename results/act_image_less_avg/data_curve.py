"""Draws data_curve.png from data_curve.json (success on seeds 2100-2399 against the demonstrations trained on).

    .venv/bin/python results/act_image_less_avg/data_curve.py
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
data = json.loads((HERE / "data_curve.json").read_text())
figure, axes = plt.subplots(figsize=(7.5, 4.6))
baseline = data["baseline"]
axes.axhline(100 * baseline["successes"] / baseline["of"], color="grey", ls="--", lw=1,
             label=f"{baseline['label']}: {baseline['successes']}/{baseline['of']}")
for series, marker in (("points", "o"), ("camera_points", "^")):
    for index, point in enumerate(data.get(series, [])):
        shift = 14 + 8 * index if series == "camera_points" else {20000: 0, 30000: 8}[point["steps"]]
        low, high = (100 * value for value in point["ci95"])
        rate = 100 * point["rate"]
        axes.errorbar(point["episodes"] + shift, rate, yerr=[[rate - low], [high - rate]], fmt=marker if
                      point["steps"] == 20000 else ("s" if series == "points" else marker), capsize=4,
                      label=f"{point['label']}: {point['successes']}/{point['of']}")
axes.set_xticks(sorted({point["episodes"] for point in data["points"]}))
axes.set_ylim(0, 75)
axes.set_xlabel("demonstrations in training (20,000 steps unless said)")
axes.set_ylabel("success on seeds 2100-2399 (%), 95% interval")
axes.set_title("Success against demonstrations (mean of the last 3 checkpoints): without images o, s; "
               "with images ^", fontsize=9)
axes.grid(alpha=0.3)
axes.legend(fontsize=7, loc="upper center", ncol=2)
figure.tight_layout()
figure.savefig(HERE / "data_curve.png", dpi=100)
print(HERE / "data_curve.png")
