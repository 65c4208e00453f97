"""act-sim compare: two reports over the same seeds, paired; the counts and McNemar's exact p checked against an
independent count and hand-computed binomial tails."""

import json
from collections import Counter
from math import comb

import pytest

from act_node import cli
from act_node.report import compare, mcnemar_exact

KINDS = ["cup", "pen", "key"]


def report(successes: list[bool], modes: list[str], first_seed: int = 100) -> dict:
    return {"policy": "p", "per_episode": [
        {"seed": first_seed + i, "task": f"pick up the {KINDS[i % 3]}", "success": ok, "outcome": mode}
        for i, (ok, mode) in enumerate(zip(successes, modes, strict=True))]}


def test_mcnemar_exact_equals_the_hand_computed_binomial_tails():
    assert mcnemar_exact(1, 5) == pytest.approx(2 * (comb(6, 0) + comb(6, 1)) / 2 ** 6) == pytest.approx(0.21875)
    assert mcnemar_exact(0, 3) == pytest.approx(0.25)  # 2 x (1/2)^3
    assert mcnemar_exact(2, 10) == pytest.approx(2 * sum(comb(12, k) for k in range(3)) / 4096)  # 0.0386
    assert mcnemar_exact(4, 4) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(7, 2) == mcnemar_exact(2, 7)


def test_the_paired_table_counts_each_seed_once_by_kind_and_by_mode():
    a_ok = [True, True, False, False, True, False, True, False, False, True, True, False]
    b_ok = [True, False, True, True, True, True, True, False, True, False, True, True]
    a_modes = ["succeeded" if ok else ("missed_grasp" if i % 2 else "hovered") for i, ok in enumerate(a_ok)]
    b_modes = ["succeeded" if ok else "never_reached" for ok in b_ok]
    result = compare(report(a_ok, a_modes), report(b_ok, b_modes))
    pairs = Counter(zip(a_ok, b_ok))  # the independent count
    table = result["success"]
    assert (table["both"], table["only_a"], table["only_b"], table["neither"]) == (
        pairs[True, True], pairs[True, False], pairs[False, True], pairs[False, False]) == (4, 2, 5, 1)
    assert table["mcnemar_p"] == pytest.approx(2 * sum(comb(7, k) for k in range(3)) / 2 ** 7)  # 0.453
    for index, kind in enumerate(KINDS):
        mine = Counter(zip(a_ok[index::3], b_ok[index::3]))
        row = result["by_kind"][kind]
        assert (row["both"], row["only_a"], row["only_b"], row["neither"]) == (
            mine[True, True], mine[True, False], mine[False, True], mine[False, False])
    hovered = result["by_mode"]["hovered"]
    assert (hovered["a"], hovered["b"], hovered["only_a"]) == (a_modes.count("hovered"), 0, a_modes.count("hovered"))
    assert sum(sum(row.values()) for row in result["modes_a_to_b"].values()) == 12
    assert result["modes_a_to_b"]["hovered"] == {"succeeded": 2}  # seeds 102 and 108: B succeeded on both
    assert result["modes_a_to_b"]["missed_grasp"] == {"succeeded": 3, "never_reached": 1}


def test_reports_over_different_seeds_or_scenes_are_refused_clearly(tmp_path):
    ok = [True, False, True]
    with pytest.raises(ValueError, match="different seeds .* 1 only in A, first \\[100\\]"):
        compare(report(ok, ["succeeded", "hovered", "succeeded"]),
                report(ok, ["succeeded", "hovered", "succeeded"], first_seed=101) | {"per_episode": report(
                    ok, ["succeeded", "hovered", "succeeded"], first_seed=101)["per_episode"][:2]})
    other_scene = report(ok, ["succeeded", "hovered", "succeeded"])
    other_scene["per_episode"][1]["task"] = "pick up the ball"
    with pytest.raises(ValueError, match="seed 101 asks 'pick up the pen' in A and 'pick up the ball' in B"):
        compare(report(ok, ["succeeded", "hovered", "succeeded"]), other_scene)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "report.json").write_text(json.dumps(report(ok, ["succeeded", "hovered", "succeeded"])))
    (tmp_path / "b.json").write_text(json.dumps(report(ok, ["succeeded", "hovered", "succeeded"], first_seed=7)))
    with pytest.raises(SystemExit, match="act-sim compare: the two reports ran different seeds"):
        cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b.json"), "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit, match="no evaluation report there"):
        cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "nothing"), "--out", str(tmp_path / "out")])


def test_compare_writes_its_table_and_picture(tmp_path, capsys):
    a, b = report([True, False, False], ["succeeded", "hovered", "missed_grasp"]), report(
        [True, True, False], ["succeeded", "succeeded", "missed_grasp"])
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(tmp_path / "out")])
    saved = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert saved["success"]["only_b"] == 1 and saved["success"]["mcnemar_p"] == 1.0
    assert (tmp_path / "out" / "compare.png").stat().st_size > 10000
    assert "success" in capsys.readouterr().out
