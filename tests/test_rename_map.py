"""A user's own checkpoint: cameras named as LeRobot's SO-101 recipes name them (laptop, phone), 480x640, no
environment_state; act-sim eval feeds it the sim's cameras through lerobot-eval's --rename_map."""

import json

import pytest
import torch

from act_node import cli
from act_node.evaluate import parse_rename_map, sim_cameras_for

IMAGE = (480, 640)
RENAME = {"observation.images.front": "observation.images.laptop",
          "observation.images.wrist": "observation.images.phone"}


@pytest.fixture(scope="module")
def laptop_phone_checkpoint(tmp_path_factory):
    """An untrained tiny ACT saved by LeRobot's own classes, its processors with made-up statistics: what a user's
    lerobot-train on an SO-101 dataset with cameras laptop and phone leaves (the weights do not matter here)."""
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.act.processor_act import make_act_pre_post_processors

    images = {f"observation.images.{name}": PolicyFeature(FeatureType.VISUAL, (3, *IMAGE)) for name in ("laptop",
                                                                                                        "phone")}
    config = ACTConfig(input_features={"observation.state": PolicyFeature(FeatureType.STATE, (6,)), **images},
                       output_features={"action": PolicyFeature(FeatureType.ACTION, (6,))}, chunk_size=10,
                       n_action_steps=10, dim_model=32, dim_feedforward=64, n_heads=2, n_encoder_layers=1,
                       n_decoder_layers=1, latent_dim=8, pretrained_backbone_weights=None, device="cpu")
    torch.manual_seed(0)
    policy = ACTPolicy(config)
    stats = {"observation.state": {"mean": torch.zeros(6), "std": torch.full((6,), 30.0)},
             "action": {"mean": torch.zeros(6), "std": torch.full((6,), 30.0)},
             **{key: {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)} for key in images}}
    preprocessor, postprocessor = make_act_pre_post_processors(config, dataset_stats=stats)
    folder = tmp_path_factory.mktemp("user") / "pretrained_model"
    policy.save_pretrained(folder)
    preprocessor.save_pretrained(folder)
    postprocessor.save_pretrained(folder)
    return folder


def test_the_checkpoint_without_a_rename_map_is_refused_with_the_map_that_would_do(laptop_phone_checkpoint, tmp_path):
    with pytest.raises(SystemExit, match=r"cameras \['laptop', 'phone'\] are none of the sim's .*--rename_map "
                                         r"'\{\"observation.images.front\": \"observation.images.laptop\""):
        cli.main(["eval", "--policy.path", str(laptop_phone_checkpoint), "--out", str(tmp_path)])


def test_laptop_and_phone_at_480x640_run_with_lerobot_evals_rename_map(laptop_phone_checkpoint, tmp_path, capsys):
    out = tmp_path / "eval"
    cli.main(["eval", "--policy.path", str(laptop_phone_checkpoint), "--rename_map", json.dumps(RENAME),
              "--episodes", "1", "--max-steps", "12", "--objects", "2", "--videos", "0", "--out", str(out)])
    report = json.loads((out / "report.json").read_text())
    assert report["cameras_given"] == {"laptop": "front", "phone": "wrist"}
    assert report["settings"]["cameras"] == ["front", "wrist"]
    assert (report["settings"]["image_height"], report["settings"]["image_width"]) == IMAGE
    episode = report["per_episode"][0]
    assert episode["steps"] == 12 and episode["policy_calls"] == 2 and episode["outcome"] is not None
    assert "front as laptop, wrist as phone" in capsys.readouterr().err


def test_lerobot_eval_through_the_plugin_takes_the_same_rename_map_and_runs_the_same_episode(
        laptop_phone_checkpoint, tmp_path):
    """lerobot-eval's own --rename_map with the plugin's env (its cameras front and wrist at 480x640): the episode
    of seed 1000 sums the reward act-sim eval's run of the same seed, rename map, steps and renderer sums. (Without
    the map, lerobot-eval refuses the checkpoint: "Feature mismatch between dataset/environment and policy".)"""
    import subprocess
    import sys

    common = ["--episodes", "1", "--first-seed", "1000", "--max-steps", "12", "--objects", "2", "--videos", "0"]
    cli.main(["eval", "--policy.path", str(laptop_phone_checkpoint), "--rename_map", json.dumps(RENAME), *common,
              "--out", str(tmp_path / "ours")])
    ours = json.loads((tmp_path / "ours" / "report.json").read_text())["per_episode"][0]
    result = subprocess.run(
        [sys.executable, "-m", "lerobot.scripts.lerobot_eval", "--env.type=act_node_pick",
         f"--policy.path={laptop_phone_checkpoint}", "--env.cameras=front,wrist",
         f"--env.observation_height={IMAGE[0]}", f"--env.observation_width={IMAGE[1]}", "--env.objects=2",
         "--env.episode_length=12", "--env.renderer=tiny", "--seed=1000", "--eval.n_episodes=1",
         "--eval.batch_size=1", "--policy.device=cpu", f"--rename_map={json.dumps(RENAME)}",
         f"--output_dir={tmp_path / 'lerobot'}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = json.loads((tmp_path / "lerobot" / "eval_info.json").read_text())["per_task"][0]["metrics"]
    assert theirs["sum_rewards"][0] == pytest.approx(ours["sum_reward"], rel=1e-4)
    assert theirs["successes"] == [ours["success"]]


def test_the_rename_map_reaches_the_preprocessors_rename_step(laptop_phone_checkpoint):
    """The images go in under the sim's names and reach the model under the checkpoint's: LeRobot's own
    rename_observations_processor does it, as in lerobot-eval."""
    import numpy as np

    from act_node.config import GraphConfig
    from act_node.evaluate import load_policy

    config = GraphConfig(policy="act", checkpoint=str(laptop_phone_checkpoint), cameras=("front", "wrist"),
                         image_height=IMAGE[0], image_width=IMAGE[1])
    policy = load_policy(config, RENAME)
    observation = {"pixels": {name: np.zeros((*IMAGE, 3), np.uint8) for name in ("front", "wrist")},
                   "agent_pos": np.zeros(6, np.float32)}
    chunk, _ = policy(observation, "pick up the cup")
    assert chunk.shape == (10, 6)
    from act_node.policy import CheckpointMismatch

    with pytest.raises(CheckpointMismatch, match="observation.images.laptop"):
        load_policy(config)  # unrenamed, the sim's front and wrist are not what it takes


@pytest.mark.parametrize("text, message", [
    ("{not json", "takes a JSON object"),
    ('["a"]', "takes a JSON object of key to key"),
    ('{"observation.images.side": "observation.images.laptop"}', "'observation.images.side' is none of the sim's"),
    ('{"observation.images.front": "observation.state"}', "a camera goes to a camera"),
    ('{"observation.images.front": "observation.images.laptop", "observation.images.top": '
     '"observation.images.laptop"}', "gives one checkpoint camera two of the sim's"),
])
def test_a_malformed_rename_map_is_refused_by_name(text, message):
    with pytest.raises(ValueError, match=message):
        parse_rename_map(text)


def test_every_camera_of_the_checkpoint_needs_a_sim_camera():
    assert sim_cameras_for(["laptop", "wrist"], {"observation.images.top": "observation.images.laptop"}) == (
        "top", "wrist")
    with pytest.raises(ValueError, match=r"\['phone'\] are none of the sim's"):
        sim_cameras_for(["laptop", "phone"], {"observation.images.front": "observation.images.laptop"})
    with pytest.raises(ValueError, match="does not take"):
        sim_cameras_for(["laptop"], {"observation.images.front": "observation.images.webcam"})
    with pytest.raises(ValueError, match="'front' would feed two"):
        sim_cameras_for(["laptop", "front"], {"observation.images.front": "observation.images.laptop"})


def test_the_graph_takes_the_rename_map_as_a_launch_argument_and_remaps_the_policys_image_topics(
        laptop_phone_checkpoint, tmp_path):
    """rename_map:= (the one parameter table's, as act-sim eval's --rename_map): the policy node subscribes under the
    checkpoint's camera names, remapped onto the sim's topics; the launched graph runs an episode with it."""
    import subprocess
    import sys

    from act_node.nodes.graph import describe

    nodes = {node.name: node for node in describe(checkpoint=str(laptop_phone_checkpoint),
                                                   rename_map=json.dumps(RENAME))}
    policy = nodes["act_policy"]
    assert policy.parameters["cameras"] == ["laptop", "phone"]
    assert policy.remappings == [("camera/laptop/image_raw", "camera/front/image_raw"),
                                 ("camera/phone/image_raw", "camera/wrist/image_raw")]
    assert nodes["act_sim"].parameters["cameras"] == ["front", "wrist"]
    with pytest.raises(ValueError, match=r"rename_map renames cameras \['top'\], which are not among cameras"):
        describe(checkpoint=str(laptop_phone_checkpoint),
                 rename_map=json.dumps({"observation.images.top": "observation.images.laptop"}))
    with pytest.raises(ValueError, match="rename_map takes a JSON object"):
        describe(checkpoint=str(laptop_phone_checkpoint), rename_map="front:laptop")

    out = tmp_path / "graph"
    launched = subprocess.run(
        [sys.executable, "-m", "act_node.cli", "launch", f"checkpoint:={laptop_phone_checkpoint}",
         f"rename_map:={json.dumps(RENAME)}", f"image_height:={IMAGE[0]}", f"image_width:={IMAGE[1]}",
         "objects:=2", "max_steps:=12", "renderer:=tiny", f"video_dir:={out}", "record_video:=false"],
        capture_output=True, text=True, timeout=300)
    assert launched.returncode == 0, launched.stderr[-3000:]
    assert "'laptop': '/camera/front/image_raw'" in launched.stderr + launched.stdout
    episode = json.loads(next(out.glob("*.json")).read_text())
    assert episode["steps"] == 12 and episode["policy_calls"] == 2
