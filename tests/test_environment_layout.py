"""environment_state's two layouts: "target" (the target's place and the request, 10 numbers) and "target_tool"
(and where the tool is relative to the target, 13). The env, the recorder, act_train, act-sim eval's config and the
policy checks agree on which a checkpoint takes, and the tool's numbers are where pybullet puts the tool."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from act_node import so101
from act_node.description import tool_point
from act_node.observation import (
    ENV_LAYOUTS,
    TOOL_NAMES,
    environment_layout,
    environment_state,
    environment_state_names,
)


def test_the_tool_numbers_are_where_pybullet_puts_the_tool_relative_to_the_target():
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=2, cameras=("wrist",), image_size=(24, 32), target_source="truth",
                        environment_layout="target_tool")
    try:
        observation, _ = env.reset(seed=4)
        rng = np.random.default_rng(0)
        for tick in range(12):  # the arm moves: the numbers follow it
            action = observation["agent_pos"] + rng.uniform(-8, 8, 6).astype(np.float32)
            observation, *_ = env.step(np.clip(action, env.action_space.low, env.action_space.high))
            state = observation["environment_state"]
            assert state.shape == (13,) and observation in env.observation_space
            assert np.array_equal(state[:10], environment_state(env.target.xy, env.scene.request))
            tcp = np.asarray(env.table.robot.link_pose("tcp")[0])
            assert state[10:] == pytest.approx([tcp[0] - env.target.xy[0], tcp[1] - env.target.xy[1], tcp[2]],
                                              abs=1e-5), tick
    finally:
        env.close()
    assert environment_state_names("target_tool") == [*environment_state_names("target"), *TOOL_NAMES]


def test_layouts_are_named_by_size_and_bad_input_is_refused_naming_it():
    assert [environment_layout(len(environment_state_names(layout))) for layout in ENV_LAYOUTS] == list(ENV_LAYOUTS)
    with pytest.raises(ValueError, match="11 entries is none of act_node's layouts"):
        environment_layout(11)
    with pytest.raises(ValueError, match="unknown environment_state layout 'tool'"):
        environment_state((0.4, 0.3), "pen", np.zeros(3), "tool")
    with pytest.raises(ValueError, match="needs the tool centre point"):
        environment_state((0.4, 0.3), "pen", None, "target_tool")
    with pytest.raises(ValueError, match="needs the tool centre point"):
        environment_state((0.4, 0.3), "pen", [0, np.nan, 0], "target_tool")
    with pytest.raises(ValueError, match="needs the 6 joint positions"):
        tool_point([0, 0, np.nan, 0, 0, 0])
    from act_node.tabletop.env import PickObjectEnv

    with pytest.raises(ValueError, match="unknown environment_state layout 'tool'"):
        PickObjectEnv(objects=2, cameras=("wrist",), image_size=(24, 32), target_source="truth",
                      environment_layout="tool")


def test_a_checkpoint_of_either_layout_passes_the_feature_check_and_no_other_size():
    from lerobot.configs.types import FeatureType, PolicyFeature

    from act_node.policy import OBS_ENV_STATE, OBS_STATE, FeatureSpec, check_features

    def config(size):
        return SimpleNamespace(input_features={OBS_STATE: PolicyFeature(FeatureType.STATE, (6,)),
                                               OBS_ENV_STATE: PolicyFeature(FeatureType.ENV, (size,))},
                               output_features={"action": PolicyFeature(FeatureType.ACTION, (6,))})

    assert check_features(config(10), FeatureSpec(cameras={})) == []
    assert check_features(config(13), FeatureSpec(cameras={})) == []
    (problem,) = check_features(config(11), FeatureSpec(cameras={}))
    assert "wants shape (11,), fed (10,) or (13,)" in problem and "10 target, 13 target_tool" in problem
    (problem,) = check_features(config(13), FeatureSpec(cameras={}, env_state_dim=10))
    assert "wants shape (13,), fed (10,)" in problem


def test_the_recorded_layout_is_the_trained_and_the_evaluated_one(tiny_tool_dataset, tiny_tool_checkpoint):
    """The dataset names its 13 numbers; act_train's checkpoint takes 13; act-sim eval's env then builds them and
    the checkpoint runs an episode on them; ChunkPolicy says which layout it takes."""
    from act_node.config import GraphConfig
    from act_node.evaluate import evaluate_episode, load_policy, make_env

    info = json.loads((tiny_tool_dataset / "meta" / "info.json").read_text())
    assert info["features"]["observation.environment_state"]["names"] == environment_state_names("target_tool")
    stats = json.loads((tiny_tool_dataset / "meta" / "stats.json").read_text())
    assert len(stats["observation.environment_state"]["mean"]) == 13
    config = GraphConfig(policy="act", checkpoint=str(tiny_tool_checkpoint), objects=2, cameras=("wrist",),
                         image_height=24, image_width=32, target_source="truth", max_steps=20)
    assert config.environment_layout() == "target_tool"
    assert GraphConfig(policy="expert").environment_layout() == "target"
    policy = load_policy(config)
    assert policy.environment_layout == "target_tool"
    env = make_env(config)
    try:
        assert env.environment_layout == "target_tool"
        result = evaluate_episode(env, policy, seed=7, n_action_steps=10)
        assert result.steps == 20
    finally:
        env.close()


def test_resuming_a_dataset_in_the_other_layout_is_refused_naming_both(tiny_tool_dataset, tmp_path):
    import shutil

    from act_node.record import ResumeRefused, record
    from act_node.tabletop.env import PickObjectEnv

    root = tmp_path / "copy"
    shutil.copytree(tiny_tool_dataset, root)
    env = PickObjectEnv(objects=2, cameras=("wrist",), image_size=(24, 32), target_source="truth", max_steps=150)
    try:
        with pytest.raises(ResumeRefused, match="observation.environment_state: recorded 13 .*this run 10"):
            record(env, "local/act_node_pick_tool", root, episodes=1, resume=True)
    finally:
        env.close()


def test_the_graphs_tool_point_is_the_sims_and_the_offline_transforms():
    """The recorder and the policy node get joints in radians and take the tool's place by forward kinematics; the
    sim reads pybullet's tcp; results/act_offset's transform took LeRobot's units: the same numbers."""
    from act_node.description import ArmChain
    from act_node.tabletop.robot import Robot
    from act_node.tabletop.world import World

    world = World()
    robot = Robot(world)
    try:
        for joints in np.random.default_rng(1).uniform(so101.LOWER_RAD, so101.UPPER_RAD, size=(4, 6)):
            robot.load(joints)
            state = environment_state((0.45, 0.3), "cup", tool_point(joints), "target_tool")
            sim = environment_state((0.45, 0.3), "cup", robot.link_pose("tcp")[0], "target_tool")
            tcp = ArmChain("tcp").positions(so101.from_lerobot(so101.to_lerobot(joints))[None])[0]
            assert state[10:] == pytest.approx([tcp[0] - 0.45, tcp[1] - 0.3, tcp[2]], abs=1e-5)
            assert state == pytest.approx(sim, abs=1e-5)
    finally:
        world.close()


def test_a_takeover_refuses_a_checkpoint_of_another_layout_than_its_env(tiny_tool_checkpoint):
    from act_lab.takeover import Takeover
    from act_node.policy import CheckpointMismatch
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=2, cameras=("wrist",), image_size=(24, 32), target_source="truth", max_steps=300)
    try:
        with pytest.raises(CheckpointMismatch, match="wants shape \\(13,\\), fed \\(10,\\)"):
            Takeover.load(tiny_tool_checkpoint, env, 5.0)
    finally:
        env.close()


def test_the_graphs_recorder_and_a_ray_recording_keep_the_layout_asked_for(tmp_path):
    """record:=DIR environment_layout:=target_tool reaches the recorder node; an unknown layout is refused naming
    the layouts; the dataset a Ray recording makes when no shard kept an episode has the layout's features."""
    from act_node.distributed import _spec
    from act_node.nodes.graph import describe
    from act_node.record import dataset_features

    nodes = describe(policy="expert", record=str(tmp_path / "data"), environment_layout="target_tool")
    (recorder,) = [node for node in nodes if node.name == "act_recorder"]
    assert recorder.parameters["environment_layout"] == "target_tool"
    with pytest.raises(ValueError, match="environment_layout must be one of target, target_tool .*got 'tool'"):
        describe(policy="expert", record=str(tmp_path / "data"), environment_layout="tool")
    settings = {"image_size": (24, 32), "cameras": ("wrist",), "fps": 30, "renderer": "tiny", "objects": 2,
                "environment_layout": "target_tool"}
    features = dataset_features(_spec(settings))
    assert features["observation.environment_state"]["names"] == environment_state_names("target_tool")


def test_bag2dataset_refuses_a_layout_without_a_target(tmp_path):
    from act_node import cli

    with pytest.raises(SystemExit, match="--environment-state target_tool is a layout of the target's"):
        cli.main(["bag2dataset", str(tmp_path / "bag"), "--out", str(tmp_path / "out"), "--no-target",
                  "--environment-state", "target_tool"])
