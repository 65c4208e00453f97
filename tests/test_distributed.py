"""Episodes as Ray tasks (act_node.distributed) on a local two-CPU cluster: the same results as the serial run for
the same seeds, evaluation and recording alike, and a worker that dies is retried without losing or doubling
an episode."""

import json
import os

import numpy as np
import pytest
from conftest import TINY_IMAGE

from act_node.config import GraphConfig
from act_node.evaluate import evaluate

ray = pytest.importorskip("ray")

REPO_ID = "local/act_node_pick"
EPISODE_KEYS = ("seed", "task", "success", "steps", "sum_reward", "max_reward", "policy_calls", "clamped_joints",
                "target_error_m", "lifted")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1")
    yield
    ray.shutdown()


def tiny_config(checkpoint, episodes: int = 4) -> GraphConfig:
    return GraphConfig(policy="act", checkpoint=str(checkpoint), episodes=episodes, first_seed=1000, objects=2,
                       image_height=TINY_IMAGE[0], image_width=TINY_IMAGE[1], max_steps=25)


def by_seed(episodes: list[dict]) -> dict[int, list]:
    return {e["seed"]: [e[key] for key in EPISODE_KEYS] for e in episodes}


@pytest.mark.parametrize("checkpoint", ["tiny_checkpoint", "tiny_state_checkpoint"])
def test_ray_evaluation_equals_the_serial_one(checkpoint, cluster, request, tmp_path):
    config = tiny_config(request.getfixturevalue(checkpoint))
    serial = evaluate(config, out=tmp_path / "serial", videos=0)
    on_ray = evaluate(config, out=tmp_path / "ray", videos=1, ray="local")  # seed 1000 here, 1001-1003 as tasks
    assert [e["seed"] for e in on_ray["per_episode"]] == [1000, 1001, 1002, 1003]
    assert by_seed(on_ray["per_episode"]) == by_seed(serial["per_episode"])  # sum_reward bit for bit
    assert on_ray["settings"]["ray"] == "local"
    for key in ("episodes", "success_rate", "mean_sum_reward", "mean_episode_length"):
        assert on_ray[key] == serial[key]


def test_a_killed_worker_is_retried_and_its_episode_counted_once(tiny_state_checkpoint, cluster, tmp_path):
    from act_node.distributed import ray_episodes

    config = tiny_config(tiny_state_checkpoint, episodes=3)
    serial = evaluate(config, out=tmp_path / "serial", videos=0)
    marker = tmp_path / "killed"

    def dies_once(config, steps, seed):  # the worker process dies in its first attempt at seed 1001
        if seed == 1001 and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)
        from act_node.evaluate import worker_episode

        return worker_episode(config, steps, seed)

    episodes = list(ray_episodes(config, 10, [1000, 1001, 1002], dies_once))
    assert marker.exists(), "the task never died: nothing was retried"
    assert sorted(e["seed"] for e in episodes) == [1000, 1001, 1002]  # each once
    assert by_seed(episodes) == by_seed(serial["per_episode"])


def load(root):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    return LeRobotDataset(REPO_ID, root=root, video_backend="pyav")


def test_ray_recording_equals_the_serial_one_in_seed_order(cluster, tmp_path):
    """Seeds 5-9 with 115 steps: the expert needs 116 for seed 7, so 4 episodes are seeds 5, 6, 8 and 9. In shards
    of 2 seeds, the first wave's (5-6, 7-8) keeps 3, the second tries seed 9 alone; the task of seeds 7-8 dies in
    its first attempt and is retried."""
    from act_node.distributed import record_ray, record_shard
    from act_node.record import SEEDS_FILE, record
    from act_node.tabletop.env import PickObjectEnv

    settings = dict(objects=2, image_size=TINY_IMAGE, target_source="truth", max_steps=115, renderer="tiny")
    env = PickObjectEnv(**settings)
    serial = record(env, REPO_ID, tmp_path / "serial", episodes=4, first_seed=5)
    env.close()
    marker = tmp_path / "killed"

    def dies_once(settings, repo_id, start, stop, options):
        if start == 7 and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)
        return record_shard(settings, repo_id, start, stop, options)

    merged = record_ray(settings, REPO_ID, tmp_path / "ray", episodes=4, first_seed=5, shard_seeds=2, shard=dies_once)
    assert marker.exists(), "the task never died: nothing was retried"
    assert serial.skipped_seeds == merged.skipped_seeds == [7]
    assert (merged.recorded, merged.total_frames) == (serial.recorded, serial.total_frames) == (4, serial.frames)
    seeds = [json.loads((tmp_path / name / SEEDS_FILE).read_text()) for name in ("serial", "ray")]
    assert seeds[0] == seeds[1] and seeds[1]["episode_seeds"] == [5, 6, 8, 9] and seeds[1]["next_seed"] == 10
    assert (tmp_path / "ray" / "meta" / "act_node_renderer.json").read_text() == \
        (tmp_path / "serial" / "meta" / "act_node_renderer.json").read_text()
    assert not (tmp_path / ".ray.shards").exists()  # the shards are gone once merged
    a, b = load(tmp_path / "serial"), load(tmp_path / "ray")
    assert (a.num_episodes, a.num_frames) == (b.num_episodes, b.num_frames) == (4, serial.frames)
    for column in a.hf_dataset.column_names:  # states, env state, actions, indices, timestamps, tasks
        assert np.array_equal(np.asarray(a.hf_dataset[column]), np.asarray(b.hf_dataset[column])), column
    assert list(a.meta.tasks.index) == list(b.meta.tasks.index)
    assert list(a.meta.episodes["length"]) == list(b.meta.episodes["length"])
    for index in range(0, a.num_frames, 7):  # decoded video frames: the shards' mp4 concatenated, not re-encoded
        frame_a, frame_b = a[index], b[index]
        assert frame_a["task"] == frame_b["task"]
        for camera in ("observation.images.front", "observation.images.wrist"):
            assert float((frame_a[camera] - frame_b[camera]).abs().max()) <= 1 / 255, (index, camera)
