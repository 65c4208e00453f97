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
