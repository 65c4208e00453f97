"""The vision encoder (act_lab/vision): labels that match what the renders show, shards that resume, and an
export that loads into LeRobot's ACTPolicy and computes there what the pretraining trunk computed.

Fast: one small shard at 64x96, a few training steps. Run: .venv/bin/python -m pytest -q tests/test_vision.py
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from act_lab.vision.labels import KIND_NAMES, image_labels, render_views

SMALL_IMAGE = (64, 96)  # layer4 map 2x3


def _env(request: str, objects: int = 1, image_size: tuple[int, int] = (96, 128)):
    from act_node.tabletop.env import PickObjectEnv

    return PickObjectEnv(objects=objects, image_size=image_size, target_source="truth", request=request,
                         renderer="tiny")


def _pixels_of(image: np.ndarray, colour: str) -> np.ndarray:
    """(count, 2) (u, v) pixel centres of the cube's red or the pen's blue, found by colour alone."""
    r, g, b = (image[..., i].astype(int) for i in range(3))
    mask = (r > 100) & (g < 90) & (b < 90) if colour == "red" else (b > 100) & (r < 90) & (g < 120) & (b > r + 40)
    v, u = np.nonzero(mask)
    return np.stack([u + 0.5, v + 0.5], axis=1)


@pytest.fixture(scope="module")
def shard(tmp_path_factory) -> Path:
    from act_lab.vision.frames import generate, shard_specs

    specs = shard_specs(tmp_path_factory.mktemp("frames"), "train", 40, SMALL_IMAGE)
    report = generate(specs, workers=1)
    assert report["frames"] == 40
    return specs[0].path


def test_render_views_draw_what_the_camera_rig_draws():
    env = _env("cube", objects=4)
    env.reset(seed=500_001)
    views = render_views(env.table)
    rig = env.table.rig.render()
    for camera in ("front", "wrist"):
        assert np.array_equal(views[camera][0], rig[camera]), camera
    env.close()


def test_an_objects_label_centre_is_where_the_render_shows_it():
    env = _env("cube")
    env.reset(seed=500_002)
    views = render_views(env.table)
    labels = image_labels(env.table, "front", views["front"][1])
    cube = KIND_NAMES.index("cube")
    red = _pixels_of(views["front"][0], "red")
    assert labels.present[cube] and len(red) >= 4 and labels.present.sum() == 1
    assert np.linalg.norm(red.mean(axis=0) - labels.centre_px[cube]) < 1.5, (red.mean(axis=0), labels.centre_px[cube])
    env.close()


def test_the_wrist_label_puts_the_grasped_cube_between_the_jaws_where_the_wrist_image_shows_it():
    from act_node.tabletop.expert import ScriptedExpert

    env = _env("cube")
    observation, _ = env.reset(seed=500_003)
    expert = ScriptedExpert(env)
    expert.reset(observation)
    cube = KIND_NAMES.index("cube")
    start = image_labels(env.table, "wrist", render_views(env.table)["wrist"][1])
    assert not start.between.any()  # at home, 15 cm above the table
    for _ in range(95):  # swing, descend, close, settle: the jaws closed on the cube
        env.act(expert.act(observation))
    views = render_views(env.table)
    labels = image_labels(env.table, "wrist", views["wrist"][1])
    assert labels.between[cube] and labels.offset_valid[cube] and labels.present[cube]
    # the fixed jaw's face on the tcp, the cube's centre half its width (17.5 mm) toward the moving jaw
    assert abs(labels.offset_m[cube, 1] - 0.0175) < 0.005, labels.offset_m[cube]
    red = _pixels_of(views["wrist"][0], "red")
    assert np.linalg.norm(red.mean(axis=0) - labels.centre_px[cube]) < 4.0, (red.mean(axis=0), labels.centre_px[cube])
    env.close()


def test_a_pens_yaw_label_is_the_direction_its_pixels_run():
    env = _env("pen", image_size=(192, 256))  # twice the recipe's size: the pen's pixels give a clean axis
    checked = 0
    for seed in range(500_004, 500_010):
        env.reset(seed=seed)
        views = render_views(env.table)
        labels = image_labels(env.table, "front", views["front"][1])
        pen = KIND_NAMES.index("pen")
        blue = _pixels_of(views["front"][0], "blue")
        if not labels.yaw_valid[pen] or len(blue) < 20:
            continue
        spread = np.cov((blue - blue.mean(axis=0)).T)
        values, vectors = np.linalg.eigh(spread)
        seen = math.atan2(vectors[1, -1], vectors[0, -1])  # the long axis, image frame (u right, v down)
        labelled = math.atan2(labels.yaw[pen, 1], labels.yaw[pen, 0]) / 2
        difference = math.degrees(abs(math.remainder(seen - labelled, math.pi)))
        assert difference < 12.0, (seed, math.degrees(seen), math.degrees(labelled))
        checked += 1
    assert checked >= 3
    env.close()


def test_shards_hold_both_cameras_labels_and_are_not_generated_twice(shard):
    from act_lab.vision.frames import generate, load_images, shard_specs

    with np.load(shard) as arrays:
        meta = json.loads(str(arrays["meta"]))
        assert arrays["front_images"].shape == (40, *SMALL_IMAGE, 3) and arrays["front_images"].dtype == np.uint8
        assert arrays["wrist_present"].shape == (40, len(KIND_NAMES))
        assert meta["seeds"][0] == 500_000 and meta["renderer"] == "tiny"
    written = shard.stat().st_mtime_ns
    again = generate(shard_specs(shard.parent, "train", 40, SMALL_IMAGE), workers=1)
    assert again["frames"] == 0 and shard.stat().st_mtime_ns == written
    images = load_images([shard])
    assert len(images) == 80 and set(images.camera.tolist()) == {0, 1}


def test_the_export_loads_into_act_and_computes_the_pretraining_trunks_maps(shard, tmp_path):
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy

    from act_lab.vision.export import write_backbone
    from act_lab.vision.frames import load_images
    from act_lab.vision.networks import Encoder, images_to_tensor
    from act_lab.vision.train import Trainer, TrainSettings
    from act_node.perception.backbone import load_backbone

    torch.manual_seed(0)
    images = load_images([shard], limit=16)  # 32 images: 2 steps
    encoder = Encoder(SMALL_IMAGE)
    settings = TrainSettings(epochs=1, batch_size=16, warmup_steps=1)
    history = Trainer(encoder, images, images, settings, tmp_path / "run").run()
    assert [entry["kind"] for entry in history] == ["epoch"] and history[0]["val"]["presence_acc"] is not None
    again = Trainer(Encoder(SMALL_IMAGE), images, images, settings, tmp_path / "run")
    assert again.restore() and again.step == history[0]["step"]  # resumes the newest checkpoint
    with pytest.raises(ValueError, match="trained with"):
        other = TrainSettings(epochs=2, batch_size=16)
        Trainer(Encoder(SMALL_IMAGE), images, images, other, tmp_path / "run").restore()
    running_var = encoder.trunk.layer3[0].bn1.running_var
    assert not torch.allclose(running_var, torch.ones_like(running_var))  # training moved the statistics

    path = tmp_path / "backbone.safetensors"
    write_backbone(encoder.trunk, path, about={"test": True})
    assert json.loads(path.with_suffix(".json").read_text())["key_prefix"] == "model.backbone."
    features = {"observation.state": PolicyFeature(FeatureType.STATE, (6,)),
                **{f"observation.images.{c}": PolicyFeature(FeatureType.VISUAL, (3, *SMALL_IMAGE))
                   for c in ("front", "wrist")}}
    policy = ACTPolicy(ACTConfig(input_features=features,
                                 output_features={"action": PolicyFeature(FeatureType.ACTION, (6,))},
                                 pretrained_backbone_weights=None, device="cpu"))
    load_backbone(policy, path)
    policy.eval()
    encoder.eval()
    batch = images_to_tensor(images.images[:6])
    with torch.no_grad():
        expected = encoder.trunk(batch)["feature_map"]  # (6, 512, 2, 3)
        loaded = policy.model.backbone(batch.contiguous())["feature_map"]
    assert loaded.shape == expected.shape == (6, 512, 2, 3)
    assert float((loaded - expected).abs().max()) < 1e-4


def test_a_stopped_training_resumes_where_it_stopped_and_ends_as_an_unstopped_one(shard, tmp_path):
    from act_lab.vision.frames import load_images
    from act_lab.vision.networks import Encoder
    from act_lab.vision.train import Trainer, TrainSettings

    images = load_images([shard], limit=8)  # 16 images
    settings = TrainSettings(epochs=2, batch_size=8, warmup_steps=1)  # 2 steps an epoch

    def trained(folder: Path, stop_at_step: int | None) -> Encoder:
        torch.manual_seed(0)
        encoder = Encoder(SMALL_IMAGE)
        Trainer(encoder, images, images, settings, folder).run(stop_at_step)
        return encoder

    whole = trained(tmp_path / "whole", None)
    stopped = trained(tmp_path / "stopped", 3)  # in the second epoch
    resumed = Encoder(SMALL_IMAGE)
    trainer = Trainer(resumed, images, images, settings, tmp_path / "stopped")
    history = trainer.run()
    assert trainer.step == 4 and [entry["epoch"] for entry in history if entry["kind"] == "epoch"] == [1, 2]
    assert not torch.equal(stopped.trunk.conv1.weight, whole.trunk.conv1.weight)
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.allclose(a.float(), b.float(), atol=1e-5), name
