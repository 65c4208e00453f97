"""An evaluation's report read, summarized by outcome, drawn on one page, and two of them compared seed by seed.

    outcome_summary(episodes)      each mode (act_node.tabletop.outcomes.MODES) overall and by requested kind,
                                   counts with 95% Wilson intervals; the modes add up to the episodes
    draw_report(report, path)      report.png: success by kind, the modes, the overall interval, and the first and
                                   last frames of one episode of each mode (the stills evaluate wrote)
    compare(a, b)                  two reports over the same seeds: the paired table (both, only A, only B,
                                   neither) and McNemar's exact p, overall, by kind and by mode
    draw_compare(result, path)     compare.png

`act-sim eval` writes report.json and report.png; `act-sim compare A B` reads two report.json (or their folders).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from act_node.observation import requested_kind
from act_node.tabletop.outcomes import MODE_TITLES, MODES

REPORT = "report.json"


def wilson_interval(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95% confidence interval of a success rate (Wilson score: sound at 0% and 100% and for few episodes)."""
    if total == 0:
        return 0.0, 1.0
    rate = successes / total
    centre = (rate + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(rate * (1 - rate) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    # at 0 and at every success the bound is the rate itself, exactly: floats left 2.8e-17 above 0 for 0 of 16
    # (a negative error bar, which matplotlib refuses) and below 1 for 6 of 6
    return max(0.0, min(rate, centre - half)), min(1.0, max(rate, centre + half))


def _rate(count: int, total: int) -> dict:
    return {"count": count, "rate": count / total if total else 0.0, "ci95": list(wilson_interval(count, total))}


def outcome_summary(episodes: list[dict]) -> dict | None:
    """{"outcomes": {mode: {count, rate, ci95}}, "by_kind": {kind: {episodes, success: {...}, outcomes: {mode:
    {...}}}}} over every mode, zeros included; None when an episode has no outcome (a record from before the
    outcomes were watched)."""
    if not episodes or any(e.get("outcome") not in MODES for e in episodes):
        return None
    kinds = sorted({requested_kind(e["task"]) for e in episodes})
    by_kind = {}
    for kind in kinds:
        mine = [e for e in episodes if requested_kind(e["task"]) == kind]
        by_kind[kind] = {"episodes": len(mine), "success": _rate(sum(e["success"] for e in mine), len(mine)),
                         "outcomes": {m: _rate(sum(e["outcome"] == m for e in mine), len(mine)) for m in MODES}}
    return {"outcomes": {m: _rate(sum(e["outcome"] == m for e in episodes), len(episodes)) for m in MODES},
            "by_kind": by_kind}


def first_of_each_mode(episodes: list[dict], prefer: set[int] = frozenset()) -> dict[str, int]:
    """{mode: seed} for each mode present: a seed in `prefer` (already filmed) if one ended so, else the lowest."""
    chosen: dict[str, int] = {}
    for episode in sorted(episodes, key=lambda e: (e["seed"] not in prefer, e["seed"])):
        chosen.setdefault(episode["outcome"], episode["seed"])
    return {mode: chosen[mode] for mode in MODES if mode in chosen}


# --- reading ------------------------------------------------------------------------------------------
def load_report(path: str | Path) -> dict:
    """A report.json, or a folder holding one; FileNotFoundError or ValueError that names what is wrong."""
    path = Path(path)
    if path.is_dir():
        path = path / REPORT
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no evaluation report there (act-sim eval writes OUT/{REPORT})")
    try:
        report = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error})") from None
    if not isinstance(report, dict) or not isinstance(report.get("per_episode"), list):
        raise ValueError(f"{path}: not an act-sim eval report (it has no per_episode list)")
    report["_path"] = str(path)
    return report


# --- comparing ----------------------------------------------------------------------------------------
def mcnemar_exact(only_a: int, only_b: int) -> float:
    """McNemar's exact test, two-sided: the binomial test of the discordant pairs against p = 1/2."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired(a: list[bool], b: list[bool]) -> dict:
    """The paired table of two outcomes over the same episodes, and McNemar's exact p."""
    both = sum(x and y for x, y in zip(a, b, strict=True))
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    return {"both": both, "only_a": only_a, "only_b": only_b, "neither": len(a) - both - only_a - only_b,
            "a": both + only_a, "b": both + only_b, "episodes": len(a), "mcnemar_p": mcnemar_exact(only_a, only_b)}


def compare(a: dict, b: dict) -> dict:
    """Two reports seed by seed (ValueError, naming the difference, unless they ran the same seeds on the same
    scenes): success paired overall and by requested kind; each mode ("ended so") paired; A's mode against B's."""
    seeds_a = {e["seed"]: e for e in a["per_episode"]}
    seeds_b = {e["seed"]: e for e in b["per_episode"]}
    if len(seeds_a) != len(a["per_episode"]) or len(seeds_b) != len(b["per_episode"]):
        raise ValueError("a report lists a seed twice: not one evaluation's per_episode")
    if set(seeds_a) != set(seeds_b):
        only_a, only_b = sorted(set(seeds_a) - set(seeds_b)), sorted(set(seeds_b) - set(seeds_a))
        raise ValueError(f"the two reports ran different seeds ({len(seeds_a)} and {len(seeds_b)} episodes; "
                         f"{len(only_a)} only in A, first {only_a[:5]}; {len(only_b)} only in B, first {only_b[:5]}): "
                         "a paired comparison needs the same seeds (act-sim eval --first-seed, --episodes, --suite)")
    seeds = sorted(seeds_a)
    differ = [s for s in seeds if seeds_a[s]["task"] != seeds_b[s]["task"]]
    if differ:
        s = differ[0]
        raise ValueError(f"seed {s} asks '{seeds_a[s]['task']}' in A and '{seeds_b[s]['task']}' in B: the scenes "
                         f"differ ({len(differ)} seeds; another --objects?), so the episodes do not pair")
    pairs = [(seeds_a[s], seeds_b[s]) for s in seeds]
    result = {"a": a.get("_path", a.get("policy")), "b": b.get("_path", b.get("policy")),
              "policy_a": a.get("policy"), "policy_b": b.get("policy"), "seeds": [seeds[0], seeds[-1]],
              "success": paired([x["success"] for x, _ in pairs], [y["success"] for _, y in pairs]),
              "by_kind": {}, "by_mode": {}, "modes_a_to_b": {}}
    for kind in sorted({requested_kind(x["task"]) for x, _ in pairs}):
        mine = [(x, y) for x, y in pairs if requested_kind(x["task"]) == kind]
        result["by_kind"][kind] = paired([x["success"] for x, _ in mine], [y["success"] for _, y in mine])
    if all(x.get("outcome") in MODES and y.get("outcome") in MODES for x, y in pairs):
        for mode in MODES:
            table = paired([x["outcome"] == mode for x, _ in pairs], [y["outcome"] == mode for _, y in pairs])
            if table["a"] or table["b"]:
                result["by_mode"][mode] = table
        for x, y in pairs:
            row = result["modes_a_to_b"].setdefault(x["outcome"], {})
            row[y["outcome"]] = row.get(y["outcome"], 0) + 1
    else:
        result["by_mode_missing"] = "a report has episodes without an outcome (from before outcomes were watched)"
    return result


# --- pictures -----------------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rate_bars(ax, labels: list[str], rows: list[dict], colour: str, title: str) -> None:
    """Horizontal bars of rates with their 95% intervals and the counts written beside them."""
    import numpy as np

    y = np.arange(len(labels))[::-1]
    rates = np.array([r["rate"] for r in rows])
    low = rates - np.array([r["ci95"][0] for r in rows])
    high = np.array([r["ci95"][1] for r in rows]) - rates
    ax.barh(y, rates * 100, color=colour, alpha=0.8, xerr=[low * 100, high * 100], capsize=3,
            error_kw={"lw": 0.8})
    for yi, row in zip(y, rows):
        ax.text(101, yi, f"{row['count']}/{row.get('of', '')}".rstrip("/"), va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlim(0, 112)
    ax.set_xlabel("% of episodes (95% Wilson interval)", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="x", labelsize=7)


def draw_report(report: dict, path: str | Path, stills: dict[str, tuple[Path, Path]] | None = None) -> Path:
    """One page: success by kind and overall (95% intervals), the episodes by mode, and for each mode the first
    and last frames of one episode (`stills`: {mode: (first.png, last.png)}; none for a report without them)."""
    import numpy as np
    from PIL import Image

    plt = _pyplot()
    path = Path(path)
    n = report["episodes"]
    summary = outcome_summary(report["per_episode"])
    stills = {mode: files for mode, files in (stills or {}).items() if all(Path(f).is_file() for f in files)}
    shown = [mode for mode in MODES if mode in stills]
    rows = 1 + (len(shown) + 2) // 3
    fig = plt.figure(figsize=(13, 3.8 + 3.6 * (rows - 1)))
    grid = fig.add_gridspec(rows, 6, height_ratios=[1] + [1] * (rows - 1))
    kinds = sorted({requested_kind(e["task"]) for e in report["per_episode"]})
    success = sum(e["success"] for e in report["per_episode"])
    rows_kind = [{"count": success, "of": n, "rate": success / n, "ci95": list(wilson_interval(success, n))}]
    for kind in kinds:
        mine = [e for e in report["per_episode"] if requested_kind(e["task"]) == kind]
        wins = sum(e["success"] for e in mine)
        rows_kind.append({"count": wins, "of": len(mine), "rate": wins / len(mine),
                          "ci95": list(wilson_interval(wins, len(mine)))})
    _rate_bars(fig.add_subplot(grid[0, :3]), ["all"] + kinds, rows_kind, "tab:green", "success by requested kind")
    ax = fig.add_subplot(grid[0, 3:])
    if summary is not None:
        modes = [m for m in MODES if summary["outcomes"][m]["count"]] or ["succeeded"]
        _rate_bars(ax, [MODE_TITLES[m] for m in modes], [{**summary["outcomes"][m], "of": n} for m in modes],
                   "tab:red", "why the episodes ended (one mode each)")
    else:
        ax.text(0.5, 0.5, "no outcomes in this report\n(evaluated before they were watched)", ha="center",
                va="center", fontsize=9)
        ax.axis("off")
    low, high = report["success_ci95"]
    fig.suptitle(f"{Path(str(report.get('policy', '?'))).name}: success {success}/{n} = {success / n:.1%} "
                 f"(95% CI {low:.1%}-{high:.1%}); seeds {min(e['seed'] for e in report['per_episode'])}-"
                 f"{max(e['seed'] for e in report['per_episode'])}", fontsize=11)
    seeds = {mode: seed for mode, seed in first_of_each_mode(report["per_episode"]).items()} if summary else {}
    for index, mode in enumerate(shown):
        first, last = (np.asarray(Image.open(f).convert("RGB")) for f in stills[mode])
        gap = np.full((6, first.shape[1], 3), 255, np.uint8)
        ax = fig.add_subplot(grid[1 + index // 3, 2 * (index % 3): 2 * (index % 3) + 2])
        ax.imshow(np.concatenate([first, gap, last], axis=0))  # the first frame above the last
        ax.set_title(f"{MODE_TITLES[mode]}: seed {seeds.get(mode, '?')}, first and last frame", fontsize=9)
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def draw_compare(result: dict, path: str | Path) -> Path:
    """compare.png: success of A and B overall and by kind with the discordant pairs and McNemar's p, and each
    mode's share in A and in B."""
    import numpy as np

    label_a, label_b = (f"{side} ({Path(str(result[f'policy_{side.lower()}'])).name})" for side in "AB")

    plt = _pyplot()
    path = Path(path)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    groups = [("all", result["success"])] + list(result["by_kind"].items())
    x = np.arange(len(groups))
    for offset, side, colour, label in ((-0.2, "a", "tab:blue", label_a), (0.2, "b", "tab:orange", label_b)):
        rates = np.array([t[side] / t["episodes"] for _, t in groups])
        bounds = np.array([wilson_interval(t[side], t["episodes"]) for _, t in groups])
        axes[0].bar(x + offset, rates * 100, 0.4, color=colour, label=label,
                    yerr=[(rates - bounds[:, 0]) * 100, (bounds[:, 1] - rates) * 100], capsize=2)
    for xi, (_, table) in zip(x, groups):
        axes[0].text(xi, 103, f"only A {table['only_a']}, only B {table['only_b']}\n"
                     f"p={table['mcnemar_p']:.2g}", ha="center",
                     fontsize=6.5)
    axes[0].set_xticks(x, [g for g, _ in groups], fontsize=8)
    axes[0].set_ylim(0, 118)
    axes[0].set_ylabel("success % (95% Wilson interval)", fontsize=8)
    axes[0].legend(fontsize=8, loc="lower right")
    axes[0].set_title(f"success, paired on {result['success']['episodes']} seeds {result['seeds'][0]}-"
                      f"{result['seeds'][1]} (McNemar's exact p)", fontsize=9)
    modes = list(result["by_mode"])
    if modes:
        y = np.arange(len(modes))[::-1]
        for offset, side, colour, label in ((0.2, "a", "tab:blue", label_a), (-0.2, "b", "tab:orange", label_b)):
            axes[1].barh(y + offset, [result["by_mode"][m][side] for m in modes], 0.4, color=colour, label=label)
        for yi, mode in zip(y, modes):
            axes[1].text(0, yi, f"  p={result['by_mode'][mode]['mcnemar_p']:.2g}", va="center", fontsize=6.5)
        axes[1].set_yticks(y, [MODE_TITLES[m] for m in modes], fontsize=8)
        axes[1].set_xlabel("episodes", fontsize=8)
        axes[1].legend(fontsize=8)
        axes[1].set_title("how the episodes ended (each mode paired: McNemar's exact p)", fontsize=9)
    else:
        axes[1].axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
