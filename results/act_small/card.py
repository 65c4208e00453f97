"""The shipped checkpoint's card tables, from the act-sim eval reports in results/act_small/card/.

    .venv/bin/python results/act_small/card.py     # the tables of models/act_target_tool_yaw_small's card
    .venv/bin/python results/act_small/card.py --card results/act_dart/card --this dart --other small \
        --other-card results/act_small/card --other-label models/act_target_tool_yaw_small
                                                   # another checkpoint's, against the shipped one

Each report is one `act-sim eval` of the checkpoint (or of the checkpoint it replaced, for the paired column):

    act-sim eval --policy.path CHECKPOINT --episodes N --first-seed S --objects K --workers 1 --videos 0 \\
        --scene SCENE --out OUT

named {which}_{scene}_{first seed}_{episodes}_{objects}.json, which being `small` (this checkpoint; --this) or
`shipped` (models/act_target_tool_yaw, the default it replaced; --other and --other-label). Pens and keys are the
episodes of the 4-object seed set that ask for a pen or a key (the objects' kinds are drawn with the scene, so about
a quarter of them).

The benchmark suites' reports are card/suites/{which}_cameras_{suite}.json:

    act-sim eval --policy.path CHECKPOINT --suite SUITE --workers 2 --videos 0 --scene cameras --out OUT

The pooled row pairs every distinct scene measured for both checkpoints with scene:=cameras: 2100-2399, 2000-2099
(the part of 2000-2199 that 2100-2399 does not hold), 2000-2099 with 6 objects and the four suites.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple

from act_node.report import compare, load_report, mcnemar_exact, wilson_interval

HERE = Path(__file__).parent / "card"
SETS = (("2100", "300", "4", "2100-2399, 4 objects"), ("2000", "200", "4", "2000-2199, 4 objects"),
        ("2000", "100", "6", "2000-2099, 6 objects"))
KINDS = ("pen", "key", "box", "cube", "cup", "toy", "ball", "can")
SUITES = ("pick-4", "pick-6", "pens-and-keys", "cluttered")


class Side(NamedTuple):
    """One checkpoint of the card: the name its reports carry and the folder they are in."""
    name: str
    folder: Path


def report(side: Side, scene: str, first: str, episodes: str, objects: str) -> dict | None:
    path = side.folder / f"{side.name}_{scene}_{first}_{episodes}_{objects}.json"
    return load_report(path) if path.is_file() else None


def rate(successes: int, total: int) -> str:
    low, high = wilson_interval(successes, total)
    return f"{successes}/{total}, {100 * successes / total:.1f}% ({100 * low:.1f}-{100 * high:.1f}%)"


def of_kinds(report: dict, kinds: tuple[str, ...]) -> tuple[int, int]:
    episodes = [e for e in report["per_episode"] if e["task"].split()[-1] in kinds]
    return sum(bool(e["success"]) for e in episodes), len(episodes)


def pooled_pairs(this: Side, other: Side) -> tuple[int, int, int, int, int] | None:
    """(scenes, the replaced one's successes, this one's, only the replaced one, only this one) over every distinct
    scene both were measured on with scene:=cameras; None while a report is missing."""
    pairs = [(f"{other.name}_cameras_{s}.json", f"{this.name}_cameras_{s}.json", keep) for s, keep in (
        ("2100_300_4", None), ("2000_200_4", lambda seed: seed < 2100), ("2000_100_6", None))]
    pairs += [(f"suites/{other.name}_cameras_{s}.json", f"suites/{this.name}_cameras_{s}.json", None)
              for s in SUITES]
    totals = [0, 0, 0, 0, 0]
    for theirs, mine, keep in pairs:
        theirs, mine = other.folder / theirs, this.folder / mine
        if not (theirs.is_file() and mine.is_file()):
            return None
        a, b = ({e["seed"]: bool(e["success"]) for e in load_report(path)["per_episode"]
                 if keep is None or keep(e["seed"])} for path in (theirs, mine))
        if a.keys() != b.keys():
            raise ValueError(f"{theirs} and {mine} hold different seeds")
        for seed in a:
            totals = [t + d for t, d in zip(totals, (1, a[seed], b[seed], a[seed] and not b[seed],
                                                      b[seed] and not a[seed]))]
    return tuple(totals)


def main() -> None:
    parser = argparse.ArgumentParser(description="a checkpoint card's tables from its act-sim eval reports")
    parser.add_argument("--card", type=Path, default=HERE, help="the reports' folder (results/act_small/card)")
    parser.add_argument("--other-card", type=Path, default=None,
                        help="where the other checkpoint's reports are (the same folder as --card)")
    parser.add_argument("--this", default="small", help="the card's checkpoint, as the reports name it (small)")
    parser.add_argument("--other", default="shipped", help="the checkpoint it is paired with (shipped)")
    parser.add_argument("--other-label", default="models/act_target_tool_yaw",
                        help="what the tables call the other one")
    args = parser.parse_args()
    this, other = Side(args.this, args.card), Side(args.other, args.other_card or args.card)
    other_label = args.other_label
    print(f"| seeds | scene:=cameras | scene:=sim | paired against {other_label}, cameras "
          "(both / only it / only this / McNemar p) |")
    print("| --- | --- | --- | --- |")
    rows = [(label, (first, episodes, objects), None) for first, episodes, objects, label in SETS]
    rows.insert(1, ("pens and keys of 2100-2399", ("2100", "300", "4"), ("pen", "key")))
    for label, (first, episodes, objects), kinds in rows:
        cells = []
        for scene in ("cameras", "sim"):
            mine = report(this, scene, first, episodes, objects)
            if mine is None:
                cells.append("not measured")
            else:
                cells.append(rate(*of_kinds(mine, kinds)) if kinds else rate(
                    sum(bool(e["success"]) for e in mine["per_episode"]), len(mine["per_episode"])))
        mine, theirs = report(this, "cameras", first, episodes, objects), report(other, "cameras", first,
                                                                                  episodes, objects)
        paired = "not measured"
        if mine is not None and theirs is not None and not kinds:
            table = compare(theirs, mine)["success"]
            paired = (f"{table['a']} against {table['b']}: {table['both']} / {table['only_a']} / {table['only_b']} / "
                      f"{table['mcnemar_p']:.3g}")
        elif mine is not None and theirs is not None:
            paired = f"{of_kinds(theirs, kinds)[0]} against {of_kinds(mine, kinds)[0]}"
        print(f"| {label} | {cells[0]} | {cells[1]} | {paired} |")
    print()
    print(f"| suite | this one | {other_label} | both / only it / only this / McNemar p |")
    print("| --- | --- | --- | --- |")
    for suite in SUITES:
        mine, theirs = (side.folder / "suites" / f"{side.name}_cameras_{suite}.json" for side in (this, other))
        if not (mine.is_file() and theirs.is_file()):
            print(f"| `{suite}` | not measured | | |")
            continue
        table = compare(load_report(theirs), load_report(mine))["success"]
        n = table["episodes"]
        print(f"| `{suite}` | {rate(table['b'], n)} | {rate(table['a'], n)} | {table['both']} / {table['only_a']} / "
              f"{table['only_b']} / {table['mcnemar_p']:.3g} |")
    print()
    pooled = pooled_pairs(this, other)
    if pooled:
        n, theirs, mine, only_theirs, only_mine = pooled
        print(f"Pooled over {n} distinct scenes, scene:=cameras: this one {rate(mine, n)}, {other_label} "
              f"{rate(theirs, n)}; {only_theirs} only it, {only_mine} only this one, McNemar p = "
              f"{mcnemar_exact(only_theirs, only_mine):.3g}.")
        print()
    print("Success by kind, 2100-2399 (scene:=cameras / scene:=sim, of the episodes):")
    print()
    print("| " + " | ".join(KINDS) + " |")
    print("| " + " | ".join("---:" for _ in KINDS) + " |")
    cameras, sim = report(this, "cameras", "2100", "300", "4"), report(this, "sim", "2100", "300", "4")
    cells = []
    for kind in KINDS:
        c = of_kinds(cameras, (kind,)) if cameras else (0, 0)
        s = of_kinds(sim, (kind,)) if sim else (0, 0)
        cells.append(f"{c[0]} / {s[0]} ({c[1]})")
    print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
