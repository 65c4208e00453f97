"""Demonstrations of recoveries: the arm is pushed off the plan on its way to the object, the dataset keeps the
expert's clean actions, and the grasp is left alone."""

import json

import numpy as np
import pytest

from act_node.record import SEEDS_FILE, record
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.perturb import QUIET_TICKS, RELEASE_TICKS, ActionNoise, closing_tick, smooth_offsets


def test_closing_tick_is_where_the_jaws_start_to_close():
    gripper = np.r_[np.full(5, 20.0), np.linspace(20, 90, 10), np.full(10, 90.0), np.linspace(90, 10, 8)]
    plan = np.zeros((len(gripper), 6))
    plan[:, -1] = gripper
    assert closing_tick(plan) == 26  # 90 - 5 is passed on the second tick of the close (80)
    plan[:, -1] = np.linspace(0, 50, 20).repeat(1)[: len(plan)].tolist() + [50.0] * (len(plan) - 20)
    assert closing_tick(plan) == len(plan)  # it never closes


def test_the_pushes_fade_out_before_the_grasp():
    plan = np.zeros((120, 6))
    plan[80:, -1] = -50.0  # closes at tick 80
    plan[:80, -1] = 40.0
    noise = ActionNoise(1.0, seed=3, plan=lambda: plan)
    action = np.zeros(6, dtype=np.float32)
    executed = np.array([noise(tick, action) for tick in range(120)])
    quiet = 80 - QUIET_TICKS
    assert np.abs(executed[:quiet - RELEASE_TICKS]).max() > 1.0  # pushed
    assert np.all(executed[quiet:] == 0)  # on the plan for the grasp and after it
    assert np.all(executed[:, -1] == 0)  # the gripper as planned
    fade = np.abs(executed[quiet - RELEASE_TICKS:quiet]).max(axis=1)
    full = np.abs(noise.offsets[quiet - RELEASE_TICKS:quiet]).max(axis=1)
    assert np.all(fade <= full + 1e-6)
    assert np.array_equal(ActionNoise(0.0, 3, lambda: plan)(5, action), action)


def test_offsets_repeat_for_a_seed_and_refuse_a_bad_scale():
    a = smooth_offsets(np.random.default_rng(1), 50, np.ones(3))
    b = smooth_offsets(np.random.default_rng(1), 50, np.ones(3))
    assert a.shape == (50, 3) and np.array_equal(a, b)
    for scale in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="action noise scale"):
            ActionNoise(scale, 0)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """The same two seeds recorded clean and pushed (no cameras: the joints say all)."""
    roots = {}
    for name, noise in (("clean", 0.0), ("pushed", 1.5)):
        env = PickObjectEnv(objects=2, cameras=(), target_source="truth", max_steps=200)
        root = tmp_path_factory.mktemp(name) / "data"
        record(env, "local/perturb", root, episodes=2, first_seed=11, action_noise=noise, after_success=10)
        env.close()
        roots[name] = root
    return roots


def _frames(root):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    data = LeRobotDataset("local/perturb", root=root).hf_dataset.with_format("numpy")
    return np.stack(data["observation.state"]), np.stack(data["action"]), np.asarray(data["episode_index"])


def test_a_pushed_recording_keeps_the_clean_actions(recordings):
    clean_state, clean_action, clean_episode = _frames(recordings["clean"])
    state, action, episode = _frames(recordings["pushed"])
    seeds = {name: json.loads((root / SEEDS_FILE).read_text()) for name, root in recordings.items()}
    assert seeds["clean"]["episode_seeds"] == seeds["pushed"]["episode_seeds"]
    assert seeds["pushed"]["episode_noise"] == [1.5, 1.5] and seeds["clean"]["episode_noise"] == [0.0, 0.0]
    first = episode == 0
    n = min(first.sum(), (clean_episode == 0).sum())
    # the recorded action is the expert's plan, the same as in the clean recording of the scene ...
    np.testing.assert_allclose(action[first][:n], clean_action[clean_episode == 0][:n], atol=1e-4)
    # ... while the arm was elsewhere: the states differ by the pushes
    gap = np.abs(state[first][:n] - clean_state[clean_episode == 0][:n])[:, :5].max()
    assert gap > 1.0, f"the pushed arm stayed within {gap:.2f} degrees of the clean one"
