"""An experiment, not a feature: does the image-less ACT close on the wrong side for want of where the neighbours are?

results/act_grasp traced most of the shipped checkpoint's failures (25 of 38 on seeds 2100-2199) to a close held up
on the object: the tcp at the right distance but on the wrong side. The expert takes the grasp with the most room
from the other objects, and the policy is not told where they are. This script gives it the nearest of them: two
more numbers in observation.environment_state, the nearest other object's x and y minus the target's (table frame,
metres), after target_tool_yaw's fifteen: seventeen.

    python -m act_lab.studies.nearest dataset SRC DST          # SRC (target_tool_yaw, 15 numbers) -> DST (17)
    python -m act_lab.studies.nearest eval CHECKPOINT OUT [act-sim eval's flags: --first-seed, --episodes, --scene]

Where the neighbour comes from:
- in `dataset`, from the scene remade from each episode's seed (meta/act_node_seeds.json), as it stood at reset:
  the objects the expert chose its side from (the remade scene's target is checked against the recording's);
- in `eval`, from the objects the Selector was given at reset: the scene reader's reading of the front camera with
  `--scene cameras` (nothing of the simulator's truth), the simulator's objects with `--scene sim`. The object
  nearest the target point is taken as the target itself and the nearest of the rest is the neighbour.
A scene with no other object gives (0, 0).

It is geometry over the objects, not models/attention_transformer2_nearest: that network answers "which object is
nearest the requested one" to 5.4 cm (results/attention), and the side a grasp needs is a matter of centimetres.

`eval` is act-sim eval with the env's 15 numbers given the two more each time the policy is asked; it runs in one
process, one episode at a time (spawned workers and lockstep slots would build envs and policies unwrapped).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

from act_lab.studies.offset import append_per_episode

NEAREST = ["nearest_minus_target_x", "nearest_minus_target_y"]
ENV_KEY = "observation.environment_state"


def nearest_offset(target_xy, objects_xy) -> np.ndarray:
    """The nearest other object's (x, y) minus the target's, (2,) float32: `objects_xy` (N, 2) holds every object
    the scene was read to have, the target among them (the one nearest `target_xy`, dropped); (0, 0) without another."""
    target = np.asarray(target_xy, dtype=np.float64).reshape(2)
    points = np.asarray(objects_xy, dtype=np.float64).reshape(-1, 2)
    if len(points) < 2:
        return np.zeros(2, np.float32)
    distance = np.linalg.norm(points - target, axis=1)
    others = np.delete(points, int(np.argmin(distance)), axis=0)
    nearest = others[int(np.argmin(np.linalg.norm(others - target, axis=1)))]
    return (nearest - target).astype(np.float32)


def dataset(src: Path, dst: Path) -> None:
    """SRC's frames with the nearest other object's offset from the target appended to environment_state."""
    import pandas as pd
    from tqdm import tqdm

    from act_node.record import SeedRecord
    from act_node.tabletop.env import PickObjectEnv

    info = json.loads((src / "meta" / "info.json").read_text())
    names = info["features"][ENV_KEY]["names"]
    if len(names) != 15:
        raise ValueError(f"{src}: environment_state has {len(names)} numbers; this study extends target_tool_yaw's 15")
    if dst.exists():
        raise FileExistsError(f"{dst} exists")
    record = SeedRecord.read(src)
    if record is None:
        raise FileNotFoundError(f"{src}: no meta/act_node_seeds.json, so the scenes cannot be remade")
    shutil.copytree(src, dst)
    paths = sorted((dst / "data").glob("chunk-*/file-*.parquet"))
    tables = [pd.read_parquet(path) for path in paths]
    first = pd.concat(tables).groupby("episode_index").first()
    env = PickObjectEnv(objects=record.objects, cameras=("wrist",), image_size=(24, 32), target_source="truth")
    offsets, worst = [], 0.0
    for episode, seed in enumerate(tqdm(record.episode_seeds, desc="scenes", unit="scene")):
        env.reset(seed=seed)
        recorded_target = np.asarray(first.loc[episode, ENV_KEY][:2], dtype=np.float64)
        target_now, _ = env.table.task.target_pose()
        worst = max(worst, float(np.abs(target_now[:2] - recorded_target).max()))
        points = [state.position[:2] for state in env.table.task.object_states()]
        offsets.append(nearest_offset(recorded_target, points))
    env.close()
    if worst > 0.01:  # the recording's target is the Selector's (within millimetres of the truth)
        raise ValueError(f"the scenes remade from the seeds differ from the recording's (a target {worst:.3f} m off)")
    append_per_episode(dst, paths, tables, offsets, [*names, *NEAREST])
    distances = np.linalg.norm(np.stack(offsets), axis=1)
    print(f"{dst}: {len(offsets)} scenes remade (targets within {worst * 1000:.1f} mm), environment state 17; "
          f"the nearest neighbour {np.median(distances) * 100:.1f} cm away (median)")


def seen_points(env) -> list:
    """The objects' (x, y) the Selector was given at this reset: the reader's (scene cameras) or the simulator's."""
    if env.scene_source == "cameras":
        return [(o.x, o.y) for o in env.seen]
    return [state.position[:2] for state in env.table.task.object_states()]


def with_nearest(env):
    """`env` whose reset also reads the nearest neighbour's offset from the target it chose (env.nearest_offset)."""
    reset = env.reset

    def reset_and_read(*args, **kwargs):
        result = reset(*args, **kwargs)
        env.nearest_offset = nearest_offset(env.target.xy, seen_points(env))
        return result

    env.reset, env.nearest_offset = reset_and_read, None
    return env


class NearestPolicy:
    """A ChunkPolicy whose 15-number observations get the nearest neighbour's offset its env read at reset (one env:
    `eval` runs one episode at a time)."""

    def __init__(self, policy):
        self.policy, self.env = policy, None

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def extend(self, observation: dict) -> dict:
        if self.env is None or self.env.nearest_offset is None:
            raise RuntimeError("the nearest neighbour is read at the env's reset: no env was reset for this policy")
        state = np.asarray(observation["environment_state"], dtype=np.float32)
        return {**observation, "environment_state": np.r_[state, self.env.nearest_offset].astype(np.float32)}

    def __call__(self, observation: dict, task: str = ""):
        return self.policy(self.extend(observation), task)

    def chunks(self, observations: list[dict], tasks: list[str]):
        return self.policy.chunks([self.extend(observation) for observation in observations], tasks)


def evaluate(argv: list[str]) -> None:
    from act_node import cli
    from act_node import evaluate as evaluation
    from act_node.envs import make_env as make_pick_env
    from act_node.policy import ChunkPolicy, FeatureSpec

    policies: list[NearestPolicy] = []

    def load_policy(config, rename_map=None):
        policies.append(NearestPolicy(ChunkPolicy.load(config.checkpoint, device=config.device,
                                                       expect=FeatureSpec(cameras={}, env_state_dim=17))))
        return policies[-1]

    def make_env(config):
        # a 17-number checkpoint's size is no act_node layout, so the config's own would be "target": the env builds
        # target_tool_yaw's 15 and the wrapper adds the two
        env = with_nearest(make_pick_env(**{**config.env_kwargs(), "environment_layout": "target_tool_yaw"}))
        for policy in policies:
            policy.env = env
        return env

    evaluation.load_policy, evaluation.make_env = load_policy, make_env
    evaluation.make_envs = lambda config, count, envs=None: [make_env(config)]
    checkpoint, out, *rest = argv
    if any(arg.startswith(("--workers", "--batch", "--ray", "--ros")) for arg in rest):
        raise SystemExit("nearest.py eval runs in one process, one episode at a time (workers, lockstep slots and "
                         "the graph would build the policy unwrapped)")
    cli.main(["eval", "--policy.path", checkpoint, "--out", out, "--videos", "0", "--workers", "1", "--batch", "1",
              *rest])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "dataset" and len(sys.argv) == 4:
        dataset(Path(sys.argv[2]), Path(sys.argv[3]))
    elif len(sys.argv) > 3 and sys.argv[1] == "eval":
        evaluate(sys.argv[2:])
    else:
        raise SystemExit(__doc__.split("\n\n")[1])
