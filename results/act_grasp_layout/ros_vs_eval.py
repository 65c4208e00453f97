"""The shipped checkpoint through the ROS 2 graph against act-sim eval in process, seed by seed.

    .venv/bin/python results/act_grasp_layout/ros_vs_eval.py

ros/grasp_cameras_2100_50_4.json is
    act-sim eval --ros --policy.path models/act_target_tool_yaw_grasp --episodes 50 --first-seed 2100 --objects 4 \\
        --videos 0 --scene cameras --out OUT                 # OUT/report_ros.json
(the sim, scene reader, selector and policy nodes as processes over Fast DDS, lockstep; the policy node plans the
grasp among the scene reader's scene/objects), and card/grasp_cameras_2100_300_4.json the same seeds in process.
"""

from __future__ import annotations

from pathlib import Path

from act_node.report import load_report

HERE = Path(__file__).parent


def main() -> None:
    graph = load_report(HERE / "ros" / "grasp_cameras_2100_50_4.json")["per_episode"]
    in_process = {e["seed"]: e for e in load_report(HERE / "card" / "grasp_cameras_2100_300_4.json")["per_episode"]}
    pairs = [(e, in_process[e["seed"]]) for e in graph]
    same = sum(bool(a["success"]) == bool(b["success"]) for a, b in pairs)
    both = [(a, b) for a, b in pairs if a["success"] and b["success"]]
    same_steps = sum(a["steps"] == b["steps"] for a, b in both)
    print(f"seeds {graph[0]['seed']}-{graph[-1]['seed']}: graph {sum(bool(a['success']) for a, _ in pairs)}/"
          f"{len(pairs)}, in process {sum(bool(b['success']) for _, b in pairs)}/{len(pairs)}; the same outcome in "
          f"{same} of {len(pairs)} seeds; of the {len(both)} both pick, the same step count in {same_steps} "
          f"(at most {max(abs(a['steps'] - b['steps']) for a, b in both)} apart)")
    for a, b in pairs:
        if bool(a["success"]) != bool(b["success"]):
            print(f"  seed {a['seed']} ({a['task']}): graph {a['outcome']}, in process {b['outcome']}")


if __name__ == "__main__":
    main()
