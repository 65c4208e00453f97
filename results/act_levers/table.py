"""The levers table: each lever against its baseline on the same seeds, paired episode by episode.

    .venv/bin/python results/act_levers/table.py          # prints the table README.md holds

Each row names two act-sim eval reports in this folder, results/act_dart/card, results/act_grasp_choice/reports or
results/act_grasp_layout/card
(report.json's per_episode, the same seeds and scenes): the baseline's successes, the lever's, the episodes both
pick, only the baseline, only the lever, and McNemar's exact p over the discordant ones (act_node.report.compare,
what `act-sim compare` prints).
"""

from __future__ import annotations

from pathlib import Path

from act_node.report import compare, load_report

HERE = Path(__file__).parent

# (lever, baseline report, lever report): seeds 2000-2199 with 4 objects unless the row says otherwise
ROWS = [
    ("the scene read from the front camera instead of the simulator's objects (shipped checkpoint)",
     "shipped_sim_2000_200_4.json", "shipped_cameras_2000_200_4.json"),
    ("temporal ensembling coefficient 0.0 instead of 0.01", "shipped_cameras_2000_200_4.json",
     "coeff_0.0_cameras_2000_200_4.json"),
    ("temporal ensembling coefficient 0.05 instead of 0.01", "shipped_cameras_2000_200_4.json",
     "coeff_0.05_cameras_2000_200_4.json"),
    ("temporal ensembling coefficient -0.05 instead of 0.01", "shipped_cameras_2000_200_4.json",
     "coeff_-0.05_cameras_2000_200_4.json"),
    ("temporal ensembling coefficient 0.1 instead of 0.01", "shipped_cameras_2000_200_4.json",
     "coeff_0.1_cameras_2000_200_4.json"),
    ("ACT at dim 128/ffn 512 under bf16 autocast, its own 40,000 steps (results/act_small)",
     "shipped_cameras_2000_200_4.json", "small_bf16_cameras_2000_200_4.json"),
    ("the same, seeds 2100-2399", "shipped_cameras_2100_300_4.json", "small_bf16_cameras_2100_300_4.json"),
    ("the same, seeds 2000-2099 with 6 objects", "shipped_cameras_2000_100_6.json",
     "small_bf16_cameras_2000_100_6.json"),
    ("training act_small on from 40,000 to 60,000 steps (the mean of 58,000-60,000 against the shipped mean of "
     "38,000-40,000), seeds 3000-3199", "small_bf16_cameras_3000_200_4.json", "small_60k_cameras_3000_200_4.json"),
    ("a close on what the policy sees: the jaws held open until the tool is within 1.5 cm of the grasp height "
     "(act_lab/studies/close_gate.py), the shipped checkpoint, seeds 3000-3199", "small_bf16_cameras_3000_200_4.json",
     "close_gate_cameras_3000_200_4.json"),
    ("DART: 240 demonstrations pushed off the plan, the expert's clean action recorded, beside the 360 clean ones; "
     "both small runs at step 20,000, one checkpoint each", "small_20k_cameras_2000_200_4.json",
     "dart_20k_cameras_2000_200_4.json"),
    ("DART, the mean of its checkpoints 28,000-30,000 against the shipped act_small (40,000), seeds 3000-3199 "
     "(results/act_dart)", "small_bf16_cameras_3000_200_4.json", "../act_dart/card/dart_cameras_3000_200_4.json"),
    ("the same, seeds 2100-2399", "small_bf16_cameras_2100_300_4.json",
     "../act_dart/card/dart_cameras_2100_300_4.json"),
    ("the same, seeds 2000-2099 with 6 objects", "small_bf16_cameras_2000_100_6.json",
     "../act_dart/card/dart_cameras_2000_100_6.json"),
    ("training DART on from 30,000 to 40,000 steps (the mean of 38,000-40,000 against the shipped mean of "
     "28,000-30,000), seeds 3000-3199", "../act_dart/card/dart_cameras_3000_200_4.json",
     "dart_40k_cameras_3000_200_4.json"),
    ("the same, seeds 2100-2399", "../act_dart/card/dart_cameras_2100_300_4.json", "dart_40k_cameras_2100_300_4.json"),
    ("the same, seeds 2000-2099 with 6 objects", "../act_dart/card/dart_cameras_2000_100_6.json",
     "dart_40k_cameras_2000_100_6.json"),
    ("the expert's grasp, four more numbers an episode (act_lab/studies/grasp.py), planned from the simulator's "
     "objects (an oracle), scene:=sim: both DART-data runs at step 15,000, the mean of 13,000-15,000, seeds "
     "2100-2399", "../act_grasp_choice/reports/dart_15k_sim_2100_300_4.json",
     "../act_grasp_choice/reports/grasp_15k_sim_2100_300_4.json"),
    ("the same at step 20,000 (the mean of 18,000-20,000), scene:=sim",
     "../act_grasp_choice/reports/dart_20k_sim_2100_300_4.json",
     "../act_grasp_choice/reports/grasp_20k_sim_2100_300_4.json"),
    ("the same at step 20,000, scene:=cameras, the grasp planned from the objects the scene reader read (nothing of "
     "the simulator's truth)", "../act_grasp_choice/reports/dart_20k_cameras_2100_300_4.json",
     "../act_grasp_choice/reports/grasp_20k_cameras_2100_300_4.json"),
    ("the same at step 30,000 (the mean of 28,000-30,000), scene:=cameras, the grasp from the reader's objects, "
     "against the shipped DART checkpoint (its card)", "../act_dart/card/dart_cameras_2100_300_4.json",
     "../act_grasp_choice/reports/grasp_30k_cameras_2100_300_4.json"),
    ("the same, seeds 2000-2099 with 6 objects", "../act_dart/card/dart_cameras_2000_100_6.json",
     "../act_grasp_choice/reports/grasp_30k_cameras_2000_100_6.json"),
    ("the same, suite pens-and-keys", "../act_dart/card/suites/dart_cameras_pens-and-keys.json",
     "../act_grasp_choice/reports/grasp_30k_cameras_pens-and-keys.json"),
    ("the same, shipped: models/act_target_tool_yaw_grasp, its grasp planned by act_node.grasp in "
     "act-sim eval's env from the reader's objects, against the DART checkpoint it replaced, seeds 2000-2199",
     "../act_dart/card/dart_cameras_2000_200_4.json", "../act_grasp_layout/card/grasp_cameras_2000_200_4.json"),
    ("the same, seeds 3000-3199", "../act_dart/card/dart_cameras_3000_200_4.json",
     "../act_grasp_layout/card/grasp_cameras_3000_200_4.json"),
    ("the same, suite pick-4", "../act_dart/card/suites/dart_cameras_pick-4.json",
     "../act_grasp_layout/card/suites/grasp_cameras_pick-4.json"),
    ("the grasp planned from the target alone (an arm without a scene reader: use_scene:=false) instead of among the "
     "scene reader's objects (models/act_target_tool_yaw_grasp), seeds 2100-2399",
     "../act_grasp_layout/card/grasp_cameras_2100_300_4.json", "../act_grasp_layout/arm/alone_cameras_2100_300_4.json"),
    ("the scene read from the front camera instead of the simulator's objects (models/act_target_tool_yaw_grasp), "
     "seeds 2100-2399", "../act_grasp_layout/card/grasp_sim_2100_300_4.json",
     "../act_grasp_layout/card/grasp_cameras_2100_300_4.json"),
    ("the nearest other object's offset from the target, two more numbers (act_lab/studies/nearest.py): both small "
     "runs at step 15,000, one checkpoint each", "small_15k_cameras_2000_200_4.json",
     "nearest_15k_cameras_2000_200_4.json"),
]


def main() -> None:
    print("| lever | baseline | lever | both | only baseline | only lever | McNemar p |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for lever, base, other in ROWS:
        if not (HERE / base).is_file() or not (HERE / other).is_file():
            print(f"| {lever} | | | | | | not measured |")
            continue
        table = compare(load_report(HERE / base), load_report(HERE / other))["success"]
        n = table["episodes"]
        print(f"| {lever} | {table['a']}/{n} | {table['b']}/{n} | {table['both']} | {table['only_a']} | "
              f"{table['only_b']} | {table['mcnemar_p']:.3g} |")


if __name__ == "__main__":
    main()
