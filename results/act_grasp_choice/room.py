"""Does the other objects' room change the expert's grasp, and does the policy fail where it does?

    .venv/bin/python results/act_grasp_choice/room.py results/act_dart/card/dart_sim_2100_300_4.json room.json

For each seed of an act-sim eval report: the scene remade, the expert's plan made twice, with the other objects
and with the scene emptied of them, and the wrist roll at the close compared (LeRobot degrees); then the report's
successes counted by whether the room turned the wrist by more than 20 degrees.
"""

from __future__ import annotations

import collections
import json
import sys


def main(report: str, out: str) -> None:
    from act_node.config import GraphConfig
    from act_node.envs import make_env
    from act_node.tabletop.perturb import closing_tick
    from act_node.tabletop.planner import plan_for_scene

    episodes = json.load(open(report))["per_episode"]
    config = GraphConfig(scene="sim", objects=json.load(open(report))["settings"]["objects"])
    env = make_env(**{**config.env_kwargs(), "environment_layout": "target"})  # the plan reads the target's place
    rows = []
    for episode in episodes:
        observation, _ = env.reset(seed=episode["seed"])
        scene = env.unwrapped
        objects = scene.object_poses()
        request, target = scene.scene.request, observation["environment_state"][:2]
        row = {"seed": episode["seed"], "kind": request, "outcome": episode["outcome"]}
        try:
            full = plan_for_scene(observation["agent_pos"], target, request, objects, scene.fps)
            alone = plan_for_scene(observation["agent_pos"], target, request,
                                   [o for o in objects if o[0] == request], scene.fps)
        except ValueError as error:  # kinematics.Unreachable is one
            rows.append({**row, "error": str(error)})
            continue
        rows.append({**row, "roll": float(full[closing_tick(full), 4]),
                     "roll_alone": float(alone[closing_tick(alone), 4])})
    with open(out, "w") as file:
        json.dump(rows, file, indent=0)
    counts = collections.Counter((row["outcome"] == "succeeded", abs(row["roll"] - row["roll_alone"]) > 20)
                                 for row in rows if "roll" in row)
    for turned in (True, False):
        total = counts[(True, turned)] + counts[(False, turned)]
        print(f"room turned the wrist {'more' if turned else 'no more'} than 20 degrees: "
              f"{counts[(True, turned)]} of {total} succeeded")
    print(f"no plan: {sum('error' in row for row in rows)} scenes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
