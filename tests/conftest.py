"""Shared fixtures: a tiny recorded dataset and a tiny ACT checkpoint trained on it with lerobot-train."""

import os
import threading
import time
from pathlib import Path

import pytest


def _claim_ros_domains() -> int:
    """Three ROS domains (this process, then +1 and +2 for subprocess graphs) no other test run here holds.

    A domain from the pid alone collided now and then with a concurrent run on the same machine, whose
    latched episode starts then reached this run's nodes. The claim is a lock held until the process exits.
    """
    import fcntl
    import tempfile

    folder = Path(tempfile.gettempdir()) / "act_node_ros_domains"
    folder.mkdir(exist_ok=True)
    blocks = 44  # domains 100..231; Fast DDS allows up to 232
    for k in range(blocks):
        block = (os.getpid() + k) % blocks
        handle = open(folder / f"{block}.lock", "w")  # noqa: SIM115 (kept open: the lock lives with it)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        _CLAIMS.append(handle)
        return 100 + 3 * block
    raise RuntimeError(f"all {blocks} ROS domain blocks under {folder} are held by other test runs")


_CLAIMS: list = []
os.environ["ROS_DOMAIN_ID"] = str(_claim_ros_domains())
os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

TINY_IMAGE = (48, 64)
TINY_ACT = ["--policy.dim_model=32", "--policy.dim_feedforward=64", "--policy.n_heads=2",
            "--policy.n_encoder_layers=1", "--policy.n_vae_encoder_layers=1", "--policy.latent_dim=8",
            "--policy.chunk_size=20", "--policy.n_action_steps=10", "--batch_size=2", "--num_workers=0"]


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Path:
    from act_node.record import record
    from act_node.tabletop.env import PickObjectEnv

    root = tmp_path_factory.mktemp("data") / "act_node_pick"
    env = PickObjectEnv(objects=2, image_size=TINY_IMAGE, target_source="truth", max_steps=150)
    record(env, "local/act_node_pick", root, episodes=2)
    env.close()
    return root


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_dataset, tmp_path_factory) -> Path:
    from act_node.training import train

    out = tmp_path_factory.mktemp("train") / "run"
    return train(tiny_dataset, "local/act_node_pick", out, steps=3, device="cpu", extra=TINY_ACT)


def wait_for(condition, seconds: float = 10.0) -> bool:
    end = time.time() + seconds
    while time.time() < end:
        if condition():
            return True
        time.sleep(0.02)
    return False


def retire(executor, *nodes) -> None:
    """Take nodes off the executor and destroy them, so that nothing they latched outlives the test."""
    for node in nodes:
        executor.remove_node(node)
        node.destroy_node()


@pytest.fixture(scope="module")
def ros():
    """rclpy for one test module, its executor spinning in a thread; nodes are added by the tests."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    rclpy.init()
    executor = SingleThreadedExecutor()
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    yield executor
    executor.shutdown()
    rclpy.try_shutdown()
