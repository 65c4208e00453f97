"""An experiment, not a feature: does the shipped ACT fail for want of which grasp the expert chose?

(It answered yes; the layout ships since as environment_state's target_tool_yaw_grasp, planned by
act_node.grasp in the env, the policy node and act-sim record. This module stays as the study's record:
its eval planned from the simulator's or the reader's objects and gave zeros where no one object of the kind was
read; the product plans the requested object at the target then.)

The expert takes an object by one of several grasps: the closing directions its symmetry allows (a pen two, half a
turn apart; a cube four), the fixed jaw on either side, ordered by the room each leaves from the other objects.
The policy is given the requested object's yaw by its symmetry (cos n yaw, sin n yaw), which names none of them,
and the wrist roll the expert turns to jumps half a turn where the order changes. In the held-not-lifted failures
of act_target_tool_yaw_dart the wrist roll at the close is off the expert's by 50 to 140 degrees in most episodes
(results/act_grasp_choice). This study gives the policy the expert's grasp, four numbers an episode: cos and sin
of the wrist roll at the close, and where the tool centre point closes relative to the target (x, y, table frame).

    python -m act_lab.studies.grasp dataset SRC DST     # SRC's 15-number environment state, and the grasp: 19
    python -m act_lab.studies.grasp eval CHECKPOINT OUT --first-seed 2100 --episodes 300 --scene sim
    python -m act_lab.studies.grasp eval CHECKPOINT OUT --first-seed 2100 --episodes 300 --scene cameras --perceived
    python -m act_lab.studies.grasp alone models/act_target_tool_yaw_grasp OUT --first-seed 2100 --episodes 300 \
        --scene cameras          # the shipped layout, its grasp planned without the other objects (an arm's case)

In `dataset` the grasp is read off each episode's own actions at the close (the pushed episodes record the plan's
clean action, and the pushes are over before the close: act_node.tabletop.perturb); the first scenes are remade
from their seeds and planned again to check that the planner gives the same numbers. In `eval` the grasp is
planned at each reset, from the objects as the simulator holds them: an oracle, privileged,
measuring what the choice is worth; with `--perceived` from the objects the scene reader read from the front
camera (`--scene cameras`), the target's place and yaw included: what the graph could give the policy.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

from act_lab.studies.offset import append_per_episode
from act_node.grasp import grasp_of_actions
from act_node.table_frame import GRASP_NAMES as GRASP

CHECK_SCENES = 24  # scenes remade and planned again in `dataset`, half clean, half pushed


def planned_grasp(env, observation: dict, perceived: bool = False) -> np.ndarray:
    """The grasp the expert plans from this first observation, for the scene as the simulator holds it, or,
    `perceived`, as the scene reader read it from the front camera (scene:=cameras: kinds, places and yaws by
    their symmetry; nothing of the simulator's truth)."""
    from act_node.tabletop.planner import plan_for_scene

    unwrapped = env.unwrapped
    if perceived:
        if unwrapped.seen is None:
            raise SystemExit("--perceived plans from the scene reader's objects: run it with --scene cameras")
        objects = [(o.kind, float(o.x), float(o.y), float(o.yaw)) for o in unwrapped.seen]
    else:
        objects = unwrapped.object_poses()
    target_xy = np.asarray(observation["environment_state"][:2], dtype=np.float64)
    plan = plan_for_scene(observation["agent_pos"], target_xy, unwrapped.scene.request, objects, unwrapped.fps)
    return grasp_of_actions(plan, target_xy)


def dataset(src: Path, dst: Path) -> None:
    import pandas as pd
    from tqdm import tqdm

    from act_node.record import SeedRecord
    from act_node.tabletop.env import PickObjectEnv

    if dst.exists():
        raise FileExistsError(f"{dst} exists")
    env_key = "observation.environment_state"
    names = json.loads((src / "meta" / "info.json").read_text())["features"][env_key]["names"]
    if len(names) != 15:
        raise SystemExit(f"{src}: environment_state has {len(names)} entries; this study starts from the 15 of "
                         "target_tool_yaw")
    shutil.copytree(src, dst)
    paths = sorted((dst / "data").glob("chunk-*/file-*.parquet"))
    tables = [pd.read_parquet(path) for path in paths]
    frames = pd.concat(tables)
    grasps = []
    for _, episode in tqdm(frames.groupby("episode_index", sort=True), desc="episodes"):
        actions = np.stack(episode["action"].to_numpy())
        target = np.stack(episode[env_key].to_numpy())[0, :2]
        grasps.append(grasp_of_actions(actions, target))
    record = SeedRecord.read(dst)
    seeds = record.episode_seeds
    if len(seeds) != len(grasps):
        raise ValueError(f"{len(grasps)} episodes but {len(seeds)} seeds in {dst}")
    env = PickObjectEnv(objects=record.objects, cameras=("wrist",), image_size=(24, 32))
    check = [*range(CHECK_SCENES // 2), *range(len(seeds) - CHECK_SCENES // 2, len(seeds))]
    worst = 0.0
    for episode in tqdm(check, desc="scenes planned again"):
        observation, _ = env.reset(seed=seeds[episode])
        worst = max(worst, float(np.abs(planned_grasp(env, observation) - grasps[episode]).max()))
    if worst > 1e-3:
        raise ValueError(f"the planner's grasp differs from the recorded close by {worst:.4f} in remade scenes")
    append_per_episode(dst, paths, tables, grasps, [*names, *GRASP])
    print(f"{dst}: {len(grasps)} episodes, environment state 19; {len(check)} scenes planned again match to "
          f"{worst:.1e}")


def with_grasp(env, perceived: bool = False):
    """`env` (a PickObjectEnv) whose observations carry the planned grasp after the 15 numbers: planned at each
    reset from the reset's observation and the objects (planned_grasp)."""
    from act_node.tabletop.kinematics import Unreachable

    reset, observe = env.reset, env.observe
    env.grasp = np.zeros(len(GRASP), np.float32)

    def extended(observation: dict) -> dict:
        state = observation["environment_state"][:15]  # the env's reset observes through the wrapped observe
        return {**observation, "environment_state": np.r_[state, env.grasp].astype(np.float32)}

    def grasp_reset(*args, **kwargs):
        observation, info = reset(*args, **kwargs)
        try:
            env.grasp = planned_grasp(env, observation, perceived)
        except (Unreachable, ValueError):  # no plan: the episode runs with zeros (the expert would fail it)
            env.grasp = np.zeros(len(GRASP), np.float32)
        return extended(observation), info

    env.reset = grasp_reset
    env.observe = lambda *args, **kwargs: extended(observe(*args, **kwargs))
    return env


def evaluate(argv: list[str]) -> None:
    from act_node import cli
    from act_node import evaluate as evaluation
    from act_node.envs import make_env as make_pick_env
    from act_node.policy import ChunkPolicy, FeatureSpec

    def load_policy(config, rename_map=None):
        return ChunkPolicy.load(config.checkpoint, device=config.device, expect=FeatureSpec(cameras={},
                                                                                            env_state_dim=19))

    def make_env(**kwargs):
        return with_grasp(make_pick_env(**{**kwargs, "environment_layout": "target_tool_yaw"}), perceived)

    perceived = "--perceived" in argv
    argv = [arg for arg in argv if arg != "--perceived"]
    evaluation.load_policy, evaluation.make_pick_env = load_policy, make_env
    checkpoint, out, *rest = argv
    if any(arg.startswith("--workers") or arg.startswith("--ray") for arg in rest):
        raise SystemExit("grasp.py eval runs in this process (spawned workers would build their envs unwrapped)")
    cli.main(["eval", "--policy.path", checkpoint, "--out", out, "--videos", "0", "--workers", "1", *rest])


def evaluate_target_alone(argv: list[str]) -> None:
    """act-sim eval of a target_tool_yaw_grasp checkpoint with the grasp planned as on an arm without a scene reader
    (the policy node's use_scene:=false): the requested object alone at the Selector's target, lying as the yaw
    reader read it, none of the other objects. The Selector still reads the scene (--scene) for the target."""
    from act_node import cli
    from act_node import evaluate as evaluation
    from act_node.envs import make_env as make_pick_env
    from act_node.grasp import planned_grasp as product_grasp

    def alone(start, target_xy, request, objects, fps, yaw_numbers=None):
        return product_grasp(start, target_xy, request, None, fps, yaw_numbers)

    def make_env(**kwargs):
        return make_pick_env(**{**kwargs, "grasp_planner": alone})

    evaluation.make_pick_env = make_env
    checkpoint, out, *rest = argv
    if any(arg.startswith("--workers") or arg.startswith("--ray") for arg in rest):
        raise SystemExit("grasp.py alone runs in this process (spawned workers would build their envs as shipped)")
    cli.main(["eval", "--policy.path", checkpoint, "--out", out, "--videos", "0", "--workers", "1", *rest])


if __name__ == "__main__":
    if sys.argv[1] == "dataset":
        dataset(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "eval":
        evaluate(sys.argv[2:])
    elif sys.argv[1] == "alone":
        evaluate_target_alone(sys.argv[2:])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}: dataset, eval or alone")
