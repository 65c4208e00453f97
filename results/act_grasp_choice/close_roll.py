"""Where the policy closes the jaws against where the expert's plan closes them, seed by seed (scene:=sim).

    .venv/bin/python results/act_grasp_choice/close_roll.py CHECKPOINT SEEDS OUT.json
    .venv/bin/python results/act_grasp_choice/close_roll.py --table OUT.json

SEEDS is comma-separated. Each seed's episode is run with the checkpoint in process (act_node.episodes, as act-sim
eval runs it) and its actions kept; the close is the first tick whose gripper command is 5 units below its widest
so far (act_node.tabletop.perturb.closing_tick), for the policy's actions and for the expert's plan of the same
scene. The joints there are compared in LeRobot degrees; `--table` prints them and the wrist roll's gap.
"""

from __future__ import annotations

import json
import sys

import numpy as np

HALF_TURN_KINDS = ("pen", "box", "key", "cup", "toy")  # a closing direction and the one half a turn on take alike


def roll_gap(policy_roll: float, expert_roll: float, kind: str) -> float:
    """Degrees between two wrist rolls, a half turn counting as none for a kind its symmetry takes alike so (a
    cube: a quarter turn)."""
    period = 90.0 if kind == "cube" else 180.0 if kind in HALF_TURN_KINDS else 360.0
    gap = abs(policy_roll - expert_roll) % period
    return min(gap, period - gap)


def measure(checkpoint: str, seeds: list[int], out: str) -> None:
    from act_node.config import GraphConfig
    from act_node.episodes import checkpoint_agent, run_episode
    from act_node.evaluate import load_policy, make_env
    from act_node.tabletop.expert import ScriptedExpert
    from act_node.tabletop.perturb import closing_tick

    config = GraphConfig(checkpoint=checkpoint, scene="sim")
    env, policy = make_env(config), load_policy(config)
    expert = ScriptedExpert(env)
    rows = []
    for seed in seeds:
        observation, _ = env.reset(seed=seed)
        expert.reset(observation)
        plan = expert.plan
        actions: list[np.ndarray] = []
        result = run_episode(env, checkpoint_agent(env, policy), seed,
                             on_step=lambda _, action, kept=actions: kept.append(np.asarray(action, np.float64)))
        taken = np.array(actions)
        close = min(closing_tick(taken), len(taken) - 1)
        rows.append({"seed": seed, "kind": env.unwrapped.scene.request, "outcome": result.outcome,
                     "expert_close_tick": closing_tick(plan), "policy_close_tick": close,
                     "expert": plan[closing_tick(plan)].tolist(), "policy": taken[close].tolist()})
        print(seed, rows[-1]["kind"], result.outcome, flush=True)
    with open(out, "w") as file:
        json.dump(rows, file, indent=0)


def table(path: str) -> None:
    rows = json.load(open(path))
    print("| seed | kind | outcome | expert's roll | policy's roll | gap (by symmetry) | pan | lift | elbow |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        expert, policy = np.array(row["expert"]), np.array(row["policy"])
        delta = policy - expert
        gap = roll_gap(policy[4], expert[4], row["kind"])
        print(f"| {row['seed']} | {row['kind']} | {row['outcome']} | {expert[4]:.0f} | {policy[4]:.0f} | {gap:.0f} | "
              f"{delta[0]:+.0f} | {delta[1]:+.0f} | {delta[2]:+.0f} |")
    for outcome in sorted({row["outcome"] for row in rows}):
        gaps = [roll_gap(row["policy"][4], row["expert"][4], row["kind"]) for row in rows if row["outcome"] == outcome]
        print(f"\n{outcome}: {len(gaps)} episodes, wrist roll {sum(g > 30 for g in gaps)} more than 30 degrees off "
              f"(by symmetry), median {np.median(gaps):.0f}", end="")
    print()


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        table(sys.argv[2])
    else:
        measure(sys.argv[1], [int(seed) for seed in sys.argv[2].split(",")], sys.argv[3])
