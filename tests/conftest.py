"""Shared fixtures: a tiny recorded dataset and a tiny ACT checkpoint trained on it with lerobot-train."""

import os
import threading
import time
from pathlib import Path

import pytest
from domains import claim_domains  # noqa: E402  (no rclpy: the domain is set before it loads)

# three ROS domains (this process, then +1 and +2 for subprocess graphs) no other test run here holds,
# claimed for the life of the process
_DOMAIN, _CLAIM = claim_domains()
os.environ["ROS_DOMAIN_ID"] = str(_DOMAIN)
os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

TINY_IMAGE = (48, 64)
TINY_ACT = ["--policy.dim_model=32", "--policy.dim_feedforward=64", "--policy.n_heads=2",
            "--policy.n_encoder_layers=1", "--policy.n_vae_encoder_layers=1", "--policy.latent_dim=8",
            "--policy.chunk_size=20", "--policy.n_action_steps=10", "--batch_size=2", "--num_workers=0"]


def record_two(tmp_path_factory, name: str, **env_settings) -> Path:
    """Two expert episodes of a 2-object scene (target from the truth, 150 ticks) as dataset `name`."""
    from act_node.record import record
    from act_node.tabletop.env import PickObjectEnv

    root = tmp_path_factory.mktemp("data") / name
    env = PickObjectEnv(objects=2, target_source="truth", max_steps=150, **env_settings)
    record(env, f"local/{name}", root, episodes=2)
    env.close()
    return root


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Path:
    return record_two(tmp_path_factory, "act_node_pick", image_size=TINY_IMAGE)


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_dataset, tmp_path_factory) -> Path:
    from act_node.training import train

    out = tmp_path_factory.mktemp("train") / "run"
    return train(tiny_dataset, "local/act_node_pick", out, steps=3, device="cpu", extra=TINY_ACT)


@pytest.fixture(scope="session")
def tiny_state_checkpoint(tiny_dataset, tmp_path_factory) -> Path:
    """A tiny ACT that takes no images (joints, target and request only): the cameras removed from the tiny
    dataset with LeRobot's own lerobot-edit-dataset, then lerobot-train."""
    import subprocess
    import sys

    from act_node.training import train

    root = tmp_path_factory.mktemp("data_state") / "act_node_pick_state"
    subprocess.run([sys.executable, "-m", "lerobot.scripts.lerobot_edit_dataset", "--repo_id=local/act_node_pick",
                    f"--root={tiny_dataset}", "--new_repo_id=local/act_node_pick_state", f"--new_root={root}",
                    "--operation.type=remove_feature",
                    '--operation.feature_names=["observation.images.front","observation.images.wrist"]'],
                   check=True, capture_output=True)
    out = tmp_path_factory.mktemp("train_state") / "run"
    return train(root, "local/act_node_pick_state", out, steps=3, device="cpu", extra=TINY_ACT)


@pytest.fixture(scope="session")
def tiny_tool_dataset(tmp_path_factory) -> Path:
    """Two expert episodes recorded with environment_state in layout target_tool (13 numbers)."""
    return record_two(tmp_path_factory, "act_node_pick_tool", cameras=("wrist",), image_size=(24, 32),
                      environment_layout="target_tool")


@pytest.fixture(scope="session")
def tiny_tool_checkpoint(tiny_tool_dataset, tmp_path_factory) -> Path:
    """An image-less ACT on the target_tool dataset (act_train, the recipe's loop: 2 steps)."""
    from act_lab.vision.act_train import Run, Settings

    out = tmp_path_factory.mktemp("train_tool") / "run"
    run = Run(tiny_tool_dataset, out / "no-cache", out / "no-backbone", out,
              Settings(steps=2, batch_size=2, save_every=2, use_cameras=False))
    return run.train(progress=False) / "pretrained_model"


def wait_for(condition, seconds: float = 10.0) -> bool:
    end = time.time() + seconds
    while time.time() < end:
        if condition():
            return True
        time.sleep(0.02)
    return False


def retire(executor, *nodes) -> None:
    """Take nodes off the `ros` executor and destroy them, so that nothing they latched outlives the test.

    On the executor's own thread, as a task: a node destroyed from another thread while the executor gathers
    its wait set raises InvalidHandle there (rclpy keeps a waitable it could not enter and adds it anyway), the
    spinning thread dies, and every later test of the module hears nothing (a full run lost two that way)."""

    def destroy() -> None:
        for node in nodes:
            executor.remove_node(node)
            node.destroy_node()

    task = executor.create_task(destroy)
    assert wait_for(task.done, 30.0), "the executor did not run the task that destroys the nodes: is it spinning?"
    if task.exception() is not None:
        raise task.exception()


# a SimNode built in a test and spun on the `ros` executor's thread draws with TinyRenderer: EGL draws only on
# the thread that made the world (act_node.tabletop.world.Client.check_thread)
THREADED_RENDERER = "tiny"


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
    alive = thread.is_alive()
    executor.shutdown()
    rclpy.try_shutdown()
    assert alive, "the executor's thread died during this module (its exception is in the warnings summary)"


@pytest.fixture(autouse=True)
def no_real_time_threads():
    """No test leaves a thread of this process at real-time priority (act_node.encoding): the processes a later test
    starts would inherit it, and a node that loops at SCHED_FIFO 99 takes a core from everything else. A thread found
    there is set back to SCHED_OTHER and the test that left it errors."""
    from act_node.encoding import realtime_threads

    yield
    raised = realtime_threads()
    for tid in raised:
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass
    if raised:
        pytest.fail(f"threads of the test process were left at real-time priority: {raised} (tid: policy)")
