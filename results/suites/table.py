"""The reference table of the benchmark suites from the reports run.sh wrote: successes, the rate and its 95%
(Wilson) interval, each checkpoint and the scripted expert on each suite, as a Markdown table on stdout."""

from __future__ import annotations

import json
from pathlib import Path

from act_node.report import wilson_interval

HERE = Path(__file__).parent
SUITES = ("pick-4", "pick-6", "pens-and-keys", "cluttered")
ROWS = ("act_target_tool_yaw_small", "act_target_tool_yaw", "act_target_tool", "act_image_less_avg", "act_pick",
        "expert")


def cell(path: Path) -> str:
    if not path.exists():
        return "not run"
    data = json.loads(path.read_text())
    report = data.get("report", data)  # act-lab expert writes {"report": ..., "episodes": ...}
    total = int(report["episodes"])
    successes = round(report["success_rate"] * total)
    low, high = wilson_interval(successes, total)
    return f"{successes}/{total} ({100 * low:.0f}-{100 * high:.0f}%)"


def main() -> None:
    print("| | " + " | ".join(f"`{s}`" for s in SUITES) + " |")
    print("| --- |" + " ---: |" * len(SUITES))
    for row in ROWS:
        name = "scripted expert (`act-lab expert --suite`)" if row == "expert" else f"`models/{row}`"
        print(f"| {name} | " + " | ".join(cell(HERE / row / f"{s}.json") for s in SUITES) + " |")


if __name__ == "__main__":
    main()
