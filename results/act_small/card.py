"""The shipped checkpoint's card tables, from the act-sim eval reports in results/act_small/card/.

    .venv/bin/python results/act_small/card.py     # the tables of models/act_target_tool_yaw_small's card

Each report is one `act-sim eval` of the checkpoint (or of the checkpoint it replaced, for the paired column):

    act-sim eval --policy.path CHECKPOINT --episodes N --first-seed S --objects K --workers 1 --videos 0 \\
        --scene SCENE --out OUT

named {which}_{scene}_{first seed}_{episodes}_{objects}.json, which being `small` (this checkpoint) or `shipped`
(models/act_target_tool_yaw, the default it replaced). Pens and keys are the episodes of the 4-object seed set
that ask for a pen or a key (the objects' kinds are drawn with the scene, so about a quarter of them).

The benchmark suites' reports are card/suites/{which}_cameras_{suite}.json:

    act-sim eval --policy.path CHECKPOINT --suite SUITE --workers 2 --videos 0 --scene cameras --out OUT

The pooled row pairs every distinct scene measured for both checkpoints with scene:=cameras: 2100-2399, 2000-2099
(the part of 2000-2199 that 2100-2399 does not hold), 2000-2099 with 6 objects and the four suites.
"""

from __future__ import annotations

from pathlib import Path

from act_node.report import compare, load_report, mcnemar_exact, wilson_interval

HERE = Path(__file__).parent / "card"
SETS = (("2100", "300", "4", "2100-2399, 4 objects"), ("2000", "200", "4", "2000-2199, 4 objects"),
        ("2000", "100", "6", "2000-2099, 6 objects"))
KINDS = ("pen", "key", "box", "cube", "cup", "toy", "ball", "can")
SUITES = ("pick-4", "pick-6", "pens-and-keys", "cluttered")


def report(which: str, scene: str, first: str, episodes: str, objects: str) -> dict | None:
    path = HERE / f"{which}_{scene}_{first}_{episodes}_{objects}.json"
    return load_report(path) if path.is_file() else None


def rate(successes: int, total: int) -> str:
    low, high = wilson_interval(successes, total)
    return f"{successes}/{total}, {100 * successes / total:.1f}% ({100 * low:.1f}-{100 * high:.1f}%)"


def of_kinds(report: dict, kinds: tuple[str, ...]) -> tuple[int, int]:
    episodes = [e for e in report["per_episode"] if e["task"].split()[-1] in kinds]
    return sum(bool(e["success"]) for e in episodes), len(episodes)


def pooled_pairs() -> tuple[int, int, int, int, int] | None:
    """(scenes, the replaced one's successes, this one's, only the replaced one, only this one) over every distinct
    scene both were measured on with scene:=cameras; None while a report is missing."""
    pairs = [(f"shipped_cameras_{s}.json", f"small_cameras_{s}.json", keep) for s, keep in (
        ("2100_300_4", None), ("2000_200_4", lambda seed: seed < 2100), ("2000_100_6", None))]
    pairs += [(f"suites/shipped_cameras_{s}.json", f"suites/small_cameras_{s}.json", None) for s in SUITES]
    totals = [0, 0, 0, 0, 0]
    for theirs, mine, keep in pairs:
        if not ((HERE / theirs).is_file() and (HERE / mine).is_file()):
            return None
        a, b = ({e["seed"]: bool(e["success"]) for e in load_report(HERE / name)["per_episode"]
                 if keep is None or keep(e["seed"])} for name in (theirs, mine))
        if a.keys() != b.keys():
            raise ValueError(f"{theirs} and {mine} hold different seeds")
        for seed in a:
            totals = [t + d for t, d in zip(totals, (1, a[seed], b[seed], a[seed] and not b[seed],
                                                      b[seed] and not a[seed]))]
    return tuple(totals)


def main() -> None:
    print("| seeds | scene:=cameras | scene:=sim | paired against models/act_target_tool_yaw, cameras "
          "(both / only it / only this / McNemar p) |")
    print("| --- | --- | --- | --- |")
    rows = [(label, (first, episodes, objects), None) for first, episodes, objects, label in SETS]
    rows.insert(1, ("pens and keys of 2100-2399", ("2100", "300", "4"), ("pen", "key")))
    for label, (first, episodes, objects), kinds in rows:
        cells = []
        for scene in ("cameras", "sim"):
            mine = report("small", scene, first, episodes, objects)
            if mine is None:
                cells.append("not measured")
            else:
                cells.append(rate(*of_kinds(mine, kinds)) if kinds else rate(
                    sum(bool(e["success"]) for e in mine["per_episode"]), len(mine["per_episode"])))
        mine, theirs = report("small", "cameras", first, episodes, objects), report("shipped", "cameras", first,
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
    print("| suite | this one | models/act_target_tool_yaw | both / only it / only this / McNemar p |")
    print("| --- | --- | --- | --- |")
    for suite in SUITES:
        mine, theirs = (HERE / "suites" / f"{w}_cameras_{suite}.json" for w in ("small", "shipped"))
        if not (mine.is_file() and theirs.is_file()):
            print(f"| `{suite}` | not measured | | |")
            continue
        table = compare(load_report(theirs), load_report(mine))["success"]
        n = table["episodes"]
        print(f"| `{suite}` | {rate(table['b'], n)} | {rate(table['a'], n)} | {table['both']} / {table['only_a']} / "
              f"{table['only_b']} / {table['mcnemar_p']:.3g} |")
    print()
    pooled = pooled_pairs()
    if pooled:
        n, theirs, mine, only_theirs, only_mine = pooled
        print(f"Pooled over {n} distinct scenes, scene:=cameras: this one {rate(mine, n)}, models/act_target_tool_yaw "
              f"{rate(theirs, n)}; {only_theirs} only it, {only_mine} only this one, McNemar p = "
              f"{mcnemar_exact(only_theirs, only_mine):.3g}.")
        print()
    print("Success by kind, 2100-2399 (scene:=cameras / scene:=sim, of the episodes):")
    print()
    print("| " + " | ".join(KINDS) + " |")
    print("| " + " | ".join("---:" for _ in KINDS) + " |")
    cameras, sim = report("small", "cameras", "2100", "300", "4"), report("small", "sim", "2100", "300", "4")
    cells = []
    for kind in KINDS:
        c = of_kinds(cameras, (kind,)) if cameras else (0, 0)
        s = of_kinds(sim, (kind,)) if sim else (0, 0)
        cells.append(f"{c[0]} / {s[0]} ({c[1]})")
    print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
