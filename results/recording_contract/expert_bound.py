"""The scripted expert's success with its steps executed as planned (act-sim record before the one action contract)
and through the graph's executor (the velocity bound at its default, as the sim node and act-sim record now do).

    PYTHONPATH=. .venv/bin/python results/recording_contract/expert_bound.py --seeds 50 --first-seed 0
"""

import argparse
import json
from pathlib import Path

import numpy as np

from act_node import so101
from act_node.envs import make_env
from act_node.episodes import run_episode
from act_node.stepping import executed
from act_node.tabletop.expert import ScriptedExpert
from act_node.tabletop.planner import plan_window


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--objects", type=int, default=4)
    parser.add_argument("--out", default=str(Path(__file__).parent / "expert_bound.json"))
    args = parser.parse_args()
    env = make_env(objects=args.objects, image_size=(96, 128), renderer="tiny")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rows = []
    for seed in seeds:
        planned = run_episode(env, ScriptedExpert(env), seed)
        expert = ScriptedExpert(env)
        bounded = executed(env, expert)
        offsets = []  # per tick, the sent command minus the planned step (LeRobot units)

        def compare(observation, action, expert=expert, offsets=offsets):
            offsets.append(action - plan_window(expert.plan, len(offsets), 1)[0])

        sent = run_episode(env, bounded, seed, on_step=compare)
        offsets = np.abs(np.array(offsets))  # (ticks, 6)
        rows.append({"seed": seed, "planned_success": planned.success, "sent_success": sent.success,
                     "planned_steps": planned.steps, "sent_steps": sent.steps,
                     "unplannable": planned.unplannable is not None,
                     "ticks_off_plan_by_joint": (offsets > 1e-3).sum(axis=0).tolist(),
                     "max_off_plan_by_joint": offsets.max(axis=0).round(2).tolist()})
    env.close()
    report = {
        "objects": args.objects, "seeds": f"{args.first_seed}..{args.first_seed + args.seeds - 1}",
        "planned_successes": sum(r["planned_success"] for r in rows),
        "sent_successes": sum(r["sent_success"] for r in rows),
        "unplannable": sum(r["unplannable"] for r in rows),
        "differ": [r["seed"] for r in rows if r["planned_success"] != r["sent_success"]],
        "joints": list(so101.JOINT_NAMES),
        "ticks_off_plan_by_joint": np.sum([r["ticks_off_plan_by_joint"] for r in rows], axis=0).tolist(),
        "max_off_plan_by_joint (degrees; gripper 0-100)": np.max([r["max_off_plan_by_joint"] for r in rows],
                                                                  axis=0).tolist(),
        "ticks": sum(r["sent_steps"] for r in rows),
        "mean_steps_of_successes": {
            key: float(np.mean([r[f"{key}_steps"] for r in rows if r["planned_success"] and r["sent_success"]]))
            for key in ("planned", "sent")},
    }
    print(json.dumps(report, indent=1))
    Path(args.out).write_text(json.dumps({"report": report, "episodes": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
