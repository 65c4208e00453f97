"""An experiment, not a feature: does the image-less ACT fail for want of where the jaws are relative to the target?

The image-less average succeeds on 42 of 100 of its own training scenes (seeds 10000-10099) and 116 of 300 unseen:
it does not reproduce its demonstrations, so the limit is not the data's coverage. Its input is the joints and the
target's place at reset; where the tool is relative to the target is a nonlinear function of both (the forward
kinematics) that it must learn from a few hundred episodes. This script adds that function's value to
observation.environment_state, three numbers a frame: the tool centre point minus the target in x and y, and its
height above the table (act_node.description.ArmChain, the URDF's own chain, as RViz draws it).

    python -m act_lab.studies.offset dataset SRC DST      # SRC's frames with the 13-number environment state
    python -m act_lab.studies.offset eval CHECKPOINT OUT --first-seed 2100 --episodes 300
    python -m act_lab.studies.offset yaw SRC13 DST15      # and the yaw oracle: two more numbers an episode
    python -m act_lab.studies.offset eval CHECKPOINT OUT --yaw --first-seed 2100 --episodes 300

The yaw oracle is privileged: the requested object's yaw at reset, read from the simulator (the scene remade from
each episode's seed), as cos(n yaw), sin(n yaw) for an object that n closing directions take alike (a pen 2, a
cube 4), zeros for a round one. It measures whether the yaw is what pens and keys lack, not a feature to ship.

`eval` is act-sim eval with the checkpoint's observation given the same three numbers each time it is asked
(act_node.evaluate.load_policy wrapped). It runs in one process: act-sim eval's workers are spawned and would
load the checkpoint unwrapped.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

from act_node import so101
from act_node.description import ArmChain

EXTRA = ["tcp_minus_target_x", "tcp_minus_target_y", "tcp_z"]
YAW = ["target_cos_n_yaw", "target_sin_n_yaw"]
CHAIN = ArmChain("tcp")


def with_offset(agent_pos: np.ndarray, env_state: np.ndarray) -> np.ndarray:
    """(N, 6) LeRobot joints and (N, 10) environment states -> (N, 13)."""
    tcp = CHAIN.positions(so101.from_lerobot(np.asarray(agent_pos, dtype=np.float64)))
    extra = np.c_[tcp[:, 0] - env_state[:, 0], tcp[:, 1] - env_state[:, 1], tcp[:, 2]]
    return np.c_[env_state, extra].astype(np.float32)


def stats(values: np.ndarray) -> dict:
    q = {f"q{p:02d}": np.quantile(values, p / 100, axis=0).tolist() for p in (1, 10, 50, 90, 99)}
    return {"min": values.min(0).tolist(), "max": values.max(0).tolist(), "mean": values.mean(0).tolist(),
            "std": values.std(0).tolist(), "count": [len(values)], **q}


def write_environment_state(dst: Path, names: list[str], every: list[np.ndarray]) -> None:
    """The new environment state's shape and names in info.json and its statistics in stats.json."""
    env = "observation.environment_state"
    info = json.loads((dst / "meta" / "info.json").read_text())
    info["features"][env]["shape"] = [len(names)]
    info["features"][env]["names"] = names
    (dst / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    all_stats = json.loads((dst / "meta" / "stats.json").read_text())
    all_stats[env] = stats(np.concatenate(every))
    (dst / "meta" / "stats.json").write_text(json.dumps(all_stats, indent=4))


def append_per_episode(dst: Path, paths: list[Path], tables: list, per_episode: list[np.ndarray],
                       names: list[str]) -> None:
    """Each frame's environment_state in `tables` (read from `paths`, written back) with its episode's numbers of
    `per_episode` appended; `names` the new state's, into info.json and stats.json."""
    env_key = "observation.environment_state"
    every = []
    for path, table in zip(paths, tables, strict=True):
        new = np.c_[np.stack(table[env_key].to_numpy()), np.stack([per_episode[e] for e in table["episode_index"]])]
        table[env_key] = list(new.astype(np.float32))
        table.to_parquet(path)
        every.append(new)
    write_environment_state(dst, names, every)


def dataset(src: Path, dst: Path) -> None:
    import pandas as pd

    if dst.exists():
        raise FileExistsError(f"{dst} exists")
    shutil.copytree(src, dst)
    env = "observation.environment_state"
    every = []
    for path in sorted((dst / "data").glob("chunk-*/file-*.parquet")):
        table = pd.read_parquet(path)
        new = with_offset(np.stack(table["observation.state"].to_numpy()), np.stack(table[env].to_numpy()))
        table[env] = list(new)
        table.to_parquet(path)
        every.append(new)
    names = [*json.loads((src / "meta" / "info.json").read_text())["features"][env]["names"][:10], *EXTRA]
    write_environment_state(dst, names, every)
    print(f"{dst}: {sum(len(e) for e in every)} frames, environment state {names}")


def target_yaw(env) -> np.ndarray:
    """The requested object's yaw now, by its symmetry: (2,)."""
    from act_node.tabletop.objects import kind as object_kind

    request = env.scene.request
    (state,) = [o for o in env.table.task.object_states() if o.kind == request]
    turns = object_kind(request).grasp_turns
    return np.zeros(2, np.float32) if turns == 0 else np.array([np.cos(turns * state.yaw),
                                                                 np.sin(turns * state.yaw)], np.float32)


def yaw_dataset(src: Path, dst: Path) -> None:
    import pandas as pd
    from tqdm import tqdm

    from act_node.record import SeedRecord
    from act_node.tabletop.env import PickObjectEnv

    if dst.exists():
        raise FileExistsError(f"{dst} exists")
    shutil.copytree(src, dst)
    env_key = "observation.environment_state"
    record = SeedRecord.read(dst)
    seeds = record.episode_seeds
    env = PickObjectEnv(objects=record.objects, cameras=("wrist",), image_size=(24, 32))
    yaws, worst = [], 0.0
    paths = sorted((dst / "data").glob("chunk-*/file-*.parquet"))
    tables = [pd.read_parquet(path) for path in paths]
    first = pd.concat(tables).groupby("episode_index").first()
    for episode, seed in enumerate(tqdm(seeds, desc="scenes")):
        observation, _ = env.reset(seed=seed)
        worst = max(worst, float(np.abs(observation["environment_state"] - first.loc[episode, env_key][:10]).max()))
        yaws.append(target_yaw(env))
    if worst > 1e-5:
        raise ValueError(f"the scenes remade from the seeds differ from the recording's (target off by {worst})")
    names = json.loads((src / "meta" / "info.json").read_text())["features"][env_key]["names"][:13]
    append_per_episode(dst, paths, tables, yaws, [*names, *YAW])
    print(f"{dst}: {len(seeds)} scenes remade (the target matches to {worst:.1e}), environment state 15")


class OffsetPolicy:
    """A ChunkPolicy whose observations get the three numbers before it reads them."""

    def __init__(self, policy, yaw_env=None):
        self.policy, self.yaw_env, self.yaw = policy, yaw_env, None

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def reset(self) -> None:
        self.yaw = None  # read again at the episode's first observation, before anything moved
        self.policy.reset()

    def __call__(self, observation: dict, task: str = ""):
        observation = dict(observation)
        state = with_offset(observation["agent_pos"][None], observation["environment_state"][None])[0]
        if self.yaw_env is not None:
            if self.yaw is None:
                self.yaw = target_yaw(self.yaw_env)
            state = np.r_[state, self.yaw].astype(np.float32)
        observation["environment_state"] = state
        return self.policy(observation, task)


def evaluate(argv: list[str]) -> None:
    from act_node import cli
    from act_node import evaluate as evaluation
    from act_node.policy import ChunkPolicy, FeatureSpec
    from act_node.tabletop.env import PickObjectEnv

    yaw = "--yaw" in argv
    argv = [arg for arg in argv if arg != "--yaw"]
    policies = []

    def load_policy(config):
        policies.append(OffsetPolicy(ChunkPolicy.load(config.checkpoint, device=config.device,
                                                      expect=FeatureSpec(cameras={}, env_state_dim=15 if yaw else 13))))
        return policies[-1]

    def make_env(config):
        # the 10-number env: this wrapper adds the numbers itself (act-sim eval alone now feeds a 13-number
        # checkpoint its layout, act_node.observation)
        env = PickObjectEnv(**{**config.env_kwargs(), "environment_layout": "target"})
        for policy in policies:
            policy.yaw_env = env if yaw else None
        return env

    evaluation.load_policy, evaluation.make_env = load_policy, make_env
    checkpoint, out, *rest = argv
    if any(arg.startswith("--workers") for arg in rest):
        raise SystemExit("offset.py eval runs in one process (spawned workers would not wrap the policy)")
    cli.main(["eval", "--policy.path", checkpoint, "--out", out, "--objects", "4", "--videos", "0", "--workers", "1",
              *rest])


if __name__ == "__main__":
    if sys.argv[1] == "dataset":
        dataset(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "yaw":
        yaw_dataset(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "eval":
        evaluate(sys.argv[2:])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}: dataset, yaw or eval")
