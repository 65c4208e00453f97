"""Expert demonstrations as a LeRobotDataset (v3.0): one episode per seed, written with LeRobot's own writer.

Features (LeRobot's SO-101 names and units):
  observation.state              (6,) float32  joint positions, degrees and gripper 0-100 (`<joint>.pos`)
  observation.environment_state  (2,) float32  the target x, y in metres, table frame
  observation.images.<camera>    (H, W, 3)     video
  action                         (6,) float32  joint position targets, same units as the state
and the task text ("pick up the cup") per frame. Only successful episodes are kept by default: a failed
demonstration teaches the failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from act_node import so101
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert

ROBOT_TYPE = "so101_sim"
JOINT_FEATURE_NAMES = [f"{name}.pos" for name in so101.JOINT_NAMES]


def dataset_features(env: PickObjectEnv) -> dict:
    features = {
        "observation.state": {"dtype": "float32", "shape": (6,), "names": JOINT_FEATURE_NAMES},
        "observation.environment_state": {"dtype": "float32", "shape": (2,), "names": ["target_x", "target_y"]},
        "action": {"dtype": "float32", "shape": (6,), "names": JOINT_FEATURE_NAMES},
    }
    for camera in env.cameras:
        features[f"observation.images.{camera.name}"] = {
            "dtype": "video", "shape": (camera.height, camera.width, 3), "names": ["height", "width", "channels"]}
    return features


@dataclass
class RecordSummary:
    root: Path
    recorded: int
    skipped_seeds: list[int]
    frames: int
    seconds: float


def record(env: PickObjectEnv, repo_id: str, root: Path, episodes: int, first_seed: int = 0,
           keep_failures: bool = False, max_attempts: int | None = None) -> RecordSummary:
    """Record `episodes` expert episodes (seeds from `first_seed` on) into a new dataset at `root`."""
    import time

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"dataset folder {root} already exists and is not empty: choose another --root")
    dataset = LeRobotDataset.create(repo_id=repo_id, fps=env.fps, features=dataset_features(env), root=root,
                                    robot_type=ROBOT_TYPE, use_videos=True)
    expert = ScriptedExpert(env)
    started, frames, recorded, skipped = time.perf_counter(), 0, 0, []
    seed = first_seed
    attempts = max_attempts if max_attempts is not None else 3 * episodes
    progress = tqdm(total=episodes, desc="recording", unit="episode")
    try:
        while recorded < episodes and seed < first_seed + attempts:
            observation, info = env.reset(seed=seed)
            expert.reset(observation)
            done = False
            while not done:
                action = expert.act(observation)
                dataset.add_frame({
                    "observation.state": observation["agent_pos"],
                    "observation.environment_state": observation["environment_state"],
                    **{f"observation.images.{name}": image for name, image in observation["pixels"].items()},
                    "action": np.asarray(action, dtype=np.float32),
                    "task": env.task,
                })
                observation, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            if info["is_success"] or keep_failures:
                frames += info["steps"]
                dataset.save_episode()
                recorded += 1
                progress.update(1)
            else:
                dataset.clear_episode_buffer()
                skipped.append(seed)
            progress.set_postfix(skipped=len(skipped))
            seed += 1
    finally:
        progress.close()
        dataset.finalize()
    if recorded < episodes:
        raise RuntimeError(f"only {recorded} of {episodes} episodes succeeded in {attempts} seeds "
                           f"(failed seeds: {skipped}); the dataset at {root} holds those {recorded}")
    return RecordSummary(root, recorded, skipped, frames, time.perf_counter() - started)
