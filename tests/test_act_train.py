"""The camera recipe's cache and ACT stages: the maps are the backbone's, the checkpoint LeRobot loads is the
policy that trained on them, a stopped run resumes to the same weights, and the recipe skips what is done."""

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from act_lab.recipe import Recipe, RecipeSettings
from act_lab.vision.act_train import CachedMaps, Demonstrations, Run, Settings, average_checkpoints
from act_lab.vision.cache import (
    RawMaps,
    act_backbone,
    backbone_maps,
    cache_maps,
    decode_camera,
    images_to_tensor,
)
from act_lab.vision.export import write_backbone
from act_lab.vision.networks import act_trunk

CAMERAS = ("front", "wrist")


@pytest.fixture(scope="module")
def backbone(tmp_path_factory) -> Path:
    torch.manual_seed(3)
    trunk = act_trunk().eval()
    # BatchNorm statistics that are not the identity, so that a fold or load that drops them shows
    for module in trunk.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    path = tmp_path_factory.mktemp("backbone") / "backbone.safetensors"
    write_backbone(trunk, path, about={"what": "test: random weights"})
    return path


@pytest.fixture(scope="module")
def cache(tiny_dataset, backbone, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cache") / "cache"
    cache_maps(tiny_dataset, backbone, out)
    return out


def test_decoded_frames_are_lerobots(tiny_dataset):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/act_node_pick", root=tiny_dataset, video_backend="pyav")
    images = decode_camera(tiny_dataset, "observation.images.wrist", progress=False)
    assert len(images) == dataset.meta.total_frames
    last = dataset.meta.total_frames - 1
    first_of_second = int(dataset.meta.episodes[1]["dataset_from_index"])
    for index in (0, 7, first_of_second - 1, first_of_second, last):
        expected = dataset[index]["observation.images.wrist"]
        assert torch.equal(images_to_tensor(images[index:index + 1])[0], expected), index


def test_cached_maps_are_the_backbones(tiny_dataset, backbone, cache):
    images = decode_camera(tiny_dataset, "observation.images.front", progress=False)
    maps = np.load(cache / "maps_front.npy")
    assert maps.dtype == np.float16 and maps.shape[:2] == (len(images), 512)
    expected = backbone_maps(act_backbone(backbone), images[-5:])
    np.testing.assert_array_equal(maps[-5:], expected)
    # done: a second call computes nothing; another backbone in the same folder is refused
    stamp = (cache / "maps_front.npy").stat().st_mtime_ns
    cache_maps(tiny_dataset, backbone, cache)
    assert (cache / "maps_front.npy").stat().st_mtime_ns == stamp
    other = backbone.with_name("other.safetensors")
    torch.manual_seed(4)
    write_backbone(act_trunk().eval(), other, about={"what": "test: another"})
    with pytest.raises(SystemExit, match="another dataset or backbone"):
        cache_maps(tiny_dataset, other, cache)


def test_raw_maps_are_the_maps_of_what_was_rendered(backbone, tmp_path):
    """record(raw_maps=...) keeps the backbone's maps of the raw renders (what the policy sees at run time), the
    cache stage assembles them in dataset order, and they are not the maps of the lossy video's frames."""
    from conftest import TINY_IMAGE

    from act_node.record import record
    from act_node.tabletop.env import PickObjectEnv

    raw = RawMaps(tmp_path / "raw", backbone)
    episode: list[np.ndarray] = []
    saved: list[np.ndarray] = []
    add, discard, save = raw.add, raw.discard, raw.save

    def keep(observation):  # the frames exactly as the simulator drew them
        episode.append(np.array(observation["pixels"]["wrist"]))
        add(observation)

    def drop():
        episode.clear()
        discard()

    def saving(index):
        saved.extend(episode)
        episode.clear()
        save(index)

    raw.add, raw.discard, raw.save = keep, drop, saving
    env = PickObjectEnv(objects=2, image_size=TINY_IMAGE, target_source="truth", max_steps=150)
    try:
        record(env, "local/raw", tmp_path / "data", episodes=2, raw_maps=raw)
    finally:
        env.close()
    assert sorted(p.name for p in (tmp_path / "raw").glob("episode_*.npz")) == ["episode_000000.npz",
                                                                                 "episode_000001.npz"]
    content = cache_maps(tmp_path / "data", backbone, tmp_path / "cache", raw_maps=tmp_path / "raw")
    assert content["source"] == "raw renders" and content["complete"]
    maps = np.load(tmp_path / "cache" / "maps_wrist.npy")
    assert len(maps) == content["dataset"]["frames"] == len(saved)
    np.testing.assert_array_equal(maps, backbone_maps(act_backbone(backbone), np.stack(saved)))
    decoded = backbone_maps(act_backbone(backbone), decode_camera(tmp_path / "data", "observation.images.wrist",
                                                                  progress=False))
    assert not np.array_equal(maps, decoded)  # the video is lossy: its maps are others
    # an episode without its maps, a file of the wrong length, another backbone: each named
    second = tmp_path / "raw" / "episode_000001.npz"
    with np.load(second) as stored:
        arrays = dict(stored)
    second.unlink()
    with pytest.raises(ValueError, match="episode 1 has no raw maps"):
        cache_maps(tmp_path / "data", backbone, tmp_path / "cache2", raw_maps=tmp_path / "raw")
    np.savez(second, **{camera: value[:-1] for camera, value in arrays.items()})
    with pytest.raises(ValueError, match="frames of maps, the dataset's episode 1 has"):
        cache_maps(tmp_path / "data", backbone, tmp_path / "cache3", raw_maps=tmp_path / "raw")
    other = backbone.with_name("other_raw.safetensors")
    torch.manual_seed(5)
    write_backbone(act_trunk().eval(), other, about={"what": "test: another"})
    with pytest.raises(ValueError, match="another backbone"):
        RawMaps(tmp_path / "raw", other)


def test_batches_pad_past_the_episode_end(tiny_dataset, cache):
    data = Demonstrations.load(tiny_dataset, cache, list(CAMERAS))
    end = int(data.episode_end[0])
    assert 0 < end < len(data) and data.episode_end[-1] == len(data)

    class Fixed:  # the frame drawn: 3 before the first episode's end
        def integers(self, low, high, size):
            return np.full(size, end - 3)

    batch = data.batch(Fixed(), 1, chunk=10)
    assert batch["action_is_pad"][0].tolist() == [False] * 3 + [True] * 7
    np.testing.assert_array_equal(batch["action"][0, 3:].numpy(), np.repeat(data.action[end - 1][None], 7, axis=0))
    np.testing.assert_array_equal(batch["observation.images.wrist"][0].numpy(), data.maps["wrist"][end - 3])


def _weights(run: Run) -> dict[str, torch.Tensor]:
    return {key: value.clone() for key, value in run.policy.state_dict().items()}


def test_checkpoint_is_the_policy_that_trained_on_the_maps(tiny_dataset, backbone, cache, tmp_path):
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors
    from safetensors.torch import load_file

    run = Run(tiny_dataset, cache, backbone, tmp_path / "act", Settings(steps=4, batch_size=2, save_every=2))
    before = {k: v.clone() for k, v in run.policy.model.backbone.state_dict().items()}
    run.train(progress=False)
    model = tmp_path / "act" / "checkpoints" / "000004" / "pretrained_model"
    assert (tmp_path / "act" / "checkpoints" / "000002" / "pretrained_model" / "config.json").is_file()
    # the backbone is frozen: the checkpoint holds the pretrained one, unchanged
    saved = load_file(str(model / "model.safetensors"))
    pretrained = load_file(str(backbone))
    assert all(torch.equal(saved[key], value) for key, value in pretrained.items())
    assert all(torch.equal(run.policy.model.backbone.state_dict()[k], v) for k, v in before.items())
    config = json.loads((model / "config.json").read_text())
    assert config["normalization_mapping"]["VISUAL"] == "IDENTITY"
    assert set(config["input_features"]) == {"observation.state", "observation.environment_state",
                                             "observation.images.front", "observation.images.wrist"}

    # LeRobot's own loading, on the camera images, answers what the trained policy answers on the cached maps
    loaded = ACTPolicy.from_pretrained(str(model)).eval()
    preprocessor, _ = make_pre_post_processors(loaded.config, pretrained_path=str(model))
    frames = np.array([0, 5, len(run.data) - 1])
    observation = {"observation.state": torch.from_numpy(run.data.state[frames]),
                   "observation.environment_state": torch.from_numpy(run.data.env[frames])}
    cached = dict(observation)
    for camera in CAMERAS:
        images = decode_camera(tiny_dataset, f"observation.images.{camera}", progress=False)
        observation[f"observation.images.{camera}"] = images_to_tensor(images[frames])
        cached[f"observation.images.{camera}"] = torch.from_numpy(run.data.maps[camera][frames].astype(np.float32))
    from_images = loaded.predict_action_chunk(preprocessor(observation))
    run.policy.model.backbone = CachedMaps()
    from_maps = run.policy.predict_action_chunk(run.preprocessor(cached))
    assert from_images.shape == (3, 100, 6)
    torch.testing.assert_close(from_images, from_maps, atol=1e-3, rtol=0)  # the maps are float16


def test_a_stopped_run_resumes_to_the_same_weights(tiny_dataset, backbone, cache, tmp_path):
    straight = Run(tiny_dataset, cache, backbone, tmp_path / "straight", Settings(steps=4, batch_size=2, save_every=2))
    straight.train(progress=False)
    first = Run(tiny_dataset, cache, backbone, tmp_path / "stopped", Settings(steps=2, batch_size=2, save_every=2))
    first.train(progress=False)
    resumed = Run(tiny_dataset, cache, backbone, tmp_path / "stopped", Settings(steps=4, batch_size=2, save_every=2))
    assert resumed.step == 2
    resumed.train(progress=False)
    a, b = _weights(straight), _weights(resumed)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[key], b[key]) for key in a), "the resumed run's weights differ from the straight run's"
    # the mean of the two checkpoints' weights, the rest the newest's
    from safetensors.torch import load_file

    checkpoints = tmp_path / "stopped" / "checkpoints"
    averaged = average_checkpoints([checkpoints / "000002" / "pretrained_model",
                                    checkpoints / "000004" / "pretrained_model"], tmp_path / "averaged")
    two, four, mean = (load_file(str(folder / "model.safetensors")) for folder in
                       (checkpoints / "000002" / "pretrained_model", checkpoints / "000004" / "pretrained_model",
                        averaged))
    moved = [key for key in four if not torch.equal(two[key], four[key])]
    assert moved and all(key.startswith("model.") for key in moved)
    for key in moved:
        torch.testing.assert_close(mean[key], (two[key] + four[key]) / 2)
    newest = checkpoints / "000004" / "pretrained_model" / "config.json"
    assert (averaged / "config.json").read_text() == newest.read_text()
    # another setting in the same folder is refused
    with pytest.raises(SystemExit, match="other settings"):
        Run(tiny_dataset, cache, backbone, tmp_path / "stopped", Settings(steps=4, batch_size=4, save_every=2))
    with pytest.raises(SystemExit, match="other settings"):
        Run(tiny_dataset, cache, backbone, tmp_path / "stopped", Settings(steps=4, batch_size=2, save_every=2, lr=1e-5))
    # a run pinned before a setting existed (its run.json lacks it) had that setting's default: it resumes
    pinned = tmp_path / "stopped" / "run.json"
    there = json.loads(pinned.read_text())
    del there["settings"]["lr"]
    pinned.write_text(json.dumps(there))
    again = Run(tiny_dataset, cache, backbone, tmp_path / "stopped", Settings(steps=6, batch_size=2, save_every=2))
    assert again.step == 4
    # recorded on since the run was pinned: refused; a pin from before the size was pinned is not compared on it
    there = json.loads(pinned.read_text())
    there["dataset_size"]["episodes"] += 1
    pinned.write_text(json.dumps(there))
    with pytest.raises(SystemExit, match="a run does not change its data midway"):
        Run(tiny_dataset, cache, backbone, tmp_path / "stopped", Settings(steps=6, batch_size=2, save_every=2))
    del there["dataset_size"]
    pinned.write_text(json.dumps(there))
    older = Run(tiny_dataset, cache, backbone, tmp_path / "stopped", Settings(steps=6, batch_size=2, save_every=2))
    assert older.step == 4


def test_a_cool_down_runs_at_its_own_learning_rate(tiny_dataset, backbone, cache, tmp_path):
    run = Run(tiny_dataset, cache, backbone, tmp_path / "act", Settings(steps=2, batch_size=2, save_every=2))
    assert [group["lr"] for group in run.optimizer.param_groups] == [run.config.optimizer_lr]
    run.train(progress=False)
    model = tmp_path / "act" / "checkpoints" / "000002" / "pretrained_model"
    cool = Run(tiny_dataset, cache, backbone, tmp_path / "cool",
               Settings(steps=2, batch_size=2, save_every=2, lr=1e-6, init_from=str(model)))
    assert [group["lr"] for group in cool.optimizer.param_groups] == [1e-6]
    cool.train(progress=False)
    config = json.loads((tmp_path / "cool" / "checkpoints" / "000002" / "pretrained_model" / "config.json").read_text())
    assert config["optimizer_lr"] == 1e-6
    with pytest.raises(ValueError, match="--lr must be a finite number > 0"):
        Run(tiny_dataset, cache, backbone, tmp_path / "bad", Settings(steps=2, batch_size=2, save_every=2, lr=0.0))


def write_info(root: Path, episodes: int, frames: int | None = None, layout_size: int = 10) -> None:
    """A dataset's meta/info.json as act-sim record leaves it, as far as the recipe reads it."""
    (root / "meta").mkdir(parents=True, exist_ok=True)
    info = {"total_episodes": episodes, "features": {"observation.environment_state": {"shape": [layout_size]}}}
    (root / "meta" / "info.json").write_text(json.dumps(info | ({"total_frames": frames} if frames else {})))


FAKE_RECORD = """#!/usr/bin/env python3
import json, sys
from pathlib import Path
args = sys.argv[1:]
root = Path(args[args.index("--root") + 1])
(root / "meta").mkdir(parents=True, exist_ok=True)
info = root / "meta" / "info.json"
have = json.loads(info.read_text())["total_episodes"] if info.is_file() else 0
sizes = {"target": 10, "target_tool": 13, "target_tool_yaw": 15, "target_tool_yaw_grasp": 19}
size = sizes[args[args.index("--environment-state") + 1]]
info.write_text(json.dumps({"total_episodes": have + int(args[args.index("--episodes") + 1]),
                            "features": {"observation.environment_state": {"shape": [size]}}}))
with open(root.parent / "calls.txt", "a") as calls:
    calls.write(" ".join(args) + "\\n")
"""


def test_a_stage_runs_until_its_result_is_there(tmp_path):
    """The record stage is three commands (the clean episodes, the pushed ones, more clean ones): run() runs all."""
    fake = tmp_path / "python"
    fake.write_text(FAKE_RECORD)
    fake.chmod(0o755)
    recipe = Recipe(tmp_path / "recipe", RecipeSettings(episodes=5, recovery_episodes=2, more_episodes=3,
                                                        encoder=str(tmp_path)), python=str(fake))
    state = recipe.run(only=["record"])
    calls = (tmp_path / "recipe" / "calls.txt").read_text().splitlines()
    assert len(calls) == 3 and "--action-noise" not in calls[0] and "--action-noise" in calls[1]
    assert "--action-noise" not in calls[2] and calls[2].split()[calls[2].split().index("--episodes") + 1] == "3"
    assert recipe.recorded_episodes() == 10 and state["stages"]["record"]["done"]


def test_the_recipe_runs_what_is_missing(tmp_path):
    recipe = Recipe(tmp_path, RecipeSettings(episodes=5, recovery_episodes=2, more_episodes=4, steps=10, save_every=5),
                    python="python")
    record = recipe.command("record")
    assert "--first-seed" in record and record[record.index("--episodes") + 1] == "5"
    assert record[record.index("--raw-maps") + 1] == str(tmp_path / "raw_maps")
    assert record[record.index("--backbone") + 1] == str(tmp_path / "encoder" / "backbone.safetensors")
    assert record[record.index("--environment-state") + 1] == "target"
    write_info(tmp_path / "data", 3, layout_size=13)  # another layout there: refused, naming both, resumed or not
    with pytest.raises(SystemExit, match="holds environment_state layout target_tool; these settings record target"):
        recipe.command("record")
    write_info(tmp_path / "data", 20, layout_size=13)
    with pytest.raises(SystemExit, match="holds environment_state layout target_tool"):
        recipe.command("record")
    write_info(tmp_path / "data", 3)
    record = recipe.command("record")
    assert "--resume" in record and record[record.index("--episodes") + 1] == "2"
    assert "--action-noise" not in record
    write_info(tmp_path / "data", 6)
    record = recipe.command("record")  # the clean ones are there: the pushed ones
    assert record[record.index("--episodes") + 1] == "1" and record[record.index("--action-noise") + 1] == "1.0"
    write_info(tmp_path / "data", 8)
    record = recipe.command("record")  # the pushed ones too: more clean ones, after them
    assert "--resume" in record and record[record.index("--episodes") + 1] == "3"
    assert "--action-noise" not in record and "--first-seed" not in record
    write_info(tmp_path / "data", 11)
    assert recipe.command("record") is None
    assert recipe.command("encoder") is not None
    (tmp_path / "encoder").mkdir()
    (tmp_path / "encoder" / "backbone.safetensors").write_bytes(b"")
    (tmp_path / "encoder" / "backbone.json").write_text("{}")
    assert recipe.command("encoder") is None
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "cache.json").write_text(json.dumps({"complete": False}))
    assert "--raw-maps" not in recipe.command("cache")  # recorded without them: the videos
    (tmp_path / "raw_maps").mkdir()
    (tmp_path / "raw_maps" / "maps.json").write_text("{}")
    assert recipe.command("cache")[-2:] == ["--raw-maps", str(tmp_path / "raw_maps")]
    (tmp_path / "cache" / "cache.json").write_text(json.dumps({"complete": True}))
    assert recipe.command("cache") is None
    # maps of an earlier, smaller dataset (recorded on since): stale, computed again
    write_info(tmp_path / "data", 7, 70)
    (tmp_path / "cache" / "cache.json").write_text(json.dumps({"complete": True,
                                                               "dataset": {"episodes": 5, "frames": 50}}))
    assert recipe.cache_state() == "stale" and recipe.command("cache") is not None
    (tmp_path / "cache" / "cache.json").write_text(json.dumps({"complete": True,
                                                               "dataset": {"episodes": 7, "frames": 70}}))
    assert recipe.cache_state() == "done" and recipe.command("cache") is None
    act = recipe.command("act")
    assert act[act.index("--steps") + 1] == "10" and act[act.index("--average-last") + 1] == "3"
    assert "--map-dropout" not in act  # RecipeSettings' own default: an older folder's runs had none
    dropping = Recipe(tmp_path, dataclasses.replace(recipe.settings, map_dropout=0.5), python="python").command("act")
    assert dropping[dropping.index("--map-dropout") + 1] == "0.5"
    (tmp_path / "act" / "checkpoints" / "000010" / "pretrained_model").mkdir(parents=True)
    (tmp_path / "act" / "checkpoints" / "000010" / "pretrained_model" / "config.json").write_text("{}")
    assert recipe.command("act") == act  # trained, not yet averaged: the same command, which then averages
    (tmp_path / "act" / "average" / "pretrained_model").mkdir(parents=True)
    (tmp_path / "act" / "average" / "pretrained_model" / "config.json").write_text("{}")
    assert recipe.command("act") is None
    # recorded on after the ACT stage ran: not "done", and not resumed on other data
    (tmp_path / "act" / "run.json").write_text(json.dumps({"dataset_size": {"episodes": 5, "frames": 50}}))
    with pytest.raises(SystemExit, match=r"trained on 5 episodes \(50 frames\); .* holds 7 \(70\) now: move"):
        recipe.command("act")
    (tmp_path / "act" / "run.json").write_text(json.dumps({"dataset_size": {"episodes": 7, "frames": 70}}))
    assert recipe.command("act") is None
    with pytest.raises(ValueError, match="unknown stage"):
        recipe.command("deploy")
    ablation = Recipe(tmp_path, RecipeSettings(steps=10, environment_state=False), python="python")
    assert "--no-environment-state" in ablation.command("act")
    shipped = Recipe(tmp_path / "b", RecipeSettings(encoder=str(tmp_path / "encoder")), python="python")
    assert shipped.command("encoder") is None
    assert str(tmp_path / "encoder" / "backbone.safetensors") in shipped.command("record")
    with pytest.raises(FileNotFoundError, match="no backbone.safetensors"):
        Recipe(tmp_path, RecipeSettings(encoder=str(tmp_path / "nowhere")), python="python").command("encoder")


def test_the_image_less_ablation_is_the_same_loop_without_the_cameras(tiny_dataset, backbone, cache, tmp_path):
    """--no-cameras: the same data, sampler and seed, an ACT with no image input and no backbone, which LeRobot
    loads and runs on the joints and the target alone."""
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    settings = Settings(steps=2, batch_size=2, save_every=2, use_cameras=False)
    run = Run(tiny_dataset, cache, backbone, tmp_path / "act", settings)
    assert run.cameras == [] and run.data.maps == {} and not hasattr(run.policy.model, "backbone")
    with_cameras = Run(tiny_dataset, cache, backbone, tmp_path / "cameras", Settings(steps=2, batch_size=2))
    batch = run.data.batch(np.random.default_rng(0), 2)
    assert not any(key.startswith("observation.images.") for key in batch)
    assert torch.equal(batch["action"], with_cameras.data.batch(np.random.default_rng(0), 2)["action"])
    run.train(progress=False)
    model = tmp_path / "act" / "checkpoints" / "000002" / "pretrained_model"
    config = json.loads((model / "config.json").read_text())
    assert set(config["input_features"]) == {"observation.state", "observation.environment_state"}
    about = json.loads((model / "act_node_training.json").read_text())
    assert about["use_cameras"] is False and "no cameras" in about["trainer"]
    loaded = ACTPolicy.from_pretrained(str(model)).eval()
    preprocessor, _ = make_pre_post_processors(loaded.config, pretrained_path=str(model))
    observation = {"observation.state": torch.from_numpy(run.data.state[:1]),
                   "observation.environment_state": torch.from_numpy(run.data.env[:1])}
    assert loaded.predict_action_chunk(preprocessor(observation)).shape == (1, 100, 6)


def test_a_camera_run_starts_from_the_image_less_one_of_the_same_data(tiny_dataset, backbone, cache, tmp_path):
    """--init-from: the camera policy begins as the image-less checkpoint (every weight it has, by name) with the
    pretrained backbone and a new image projection; a checkpoint of other data or another architecture is refused
    by name, and nothing is loaded then."""
    from safetensors.torch import load_file, save_file

    from act_node.perception.backbone import load_backbone

    Run(tiny_dataset, cache, backbone, tmp_path / "plain", Settings(steps=2, batch_size=2, save_every=2,
                                                                    use_cameras=False)).train(progress=False)
    plain = tmp_path / "plain" / "checkpoints" / "000002" / "pretrained_model"
    weights = load_file(str(plain / "model.safetensors"))
    run = Run(tiny_dataset, cache, backbone, tmp_path / "warm", Settings(steps=2, batch_size=2, init_from=str(plain)))
    state = run.policy.state_dict()
    assert weights and all(torch.equal(state[key], value) for key, value in weights.items())
    assert run.warm_started and all(key.startswith(("model.backbone.", "model.encoder_img_feat_input_proj."))
                                    for key in run.warm_started)
    assert any(key.startswith("model.encoder_img_feat_input_proj.") for key in run.warm_started)
    reference = Run(tiny_dataset, cache, backbone, tmp_path / "cold", Settings(steps=2, batch_size=2))
    cold = reference.policy.state_dict()
    assert any(not torch.equal(cold[key], value) for key, value in weights.items()), "the start did not change"
    load_backbone(reference.policy, backbone)
    assert all(torch.equal(state[key], reference.policy.state_dict()[key]) for key in state
               if key.startswith("model.backbone."))
    # the image-less policy cannot take a camera checkpoint (its image projection has no place there)
    run.train(progress=False)
    camera = tmp_path / "warm" / "checkpoints" / "000002" / "pretrained_model"
    with pytest.raises(ValueError, match=r"model\.backbone\..* is not in this policy \(another architecture\)"):
        Run(tiny_dataset, cache, backbone, tmp_path / "back", Settings(steps=2, use_cameras=False,
                                                                       init_from=str(camera)))
    # a checkpoint normalized with other statistics: other data
    other = tmp_path / "other"
    other.mkdir()
    for file in plain.iterdir():
        (other / file.name).write_bytes(file.read_bytes())
    stats_file = next(other.glob("policy_preprocessor_step_*_normalizer_processor.safetensors"))
    stats = load_file(str(stats_file))
    # the same episodes recorded on another machine: float rounding, a ten-thousandth of a std, is the same data
    rounded = dict(stats, **{"action.mean": stats["action.mean"] + 1e-4 * stats["action.std"]})
    save_file(rounded, str(stats_file))
    rerecorded = Run(tiny_dataset, cache, backbone, tmp_path / "rounded", Settings(steps=2, init_from=str(other)))
    assert rerecorded.warm_started
    for key, shift in (("action.mean", 0.1), ("action.std", 0.01 * stats["action.std"]),
                       ("action.mean", 2e-3 * stats["action.std"])):
        save_file(dict(stats, **{key: stats[key] + shift}), str(stats_file))
        with pytest.raises(ValueError, match=key.replace(".", r"\.") + " is not this dataset's"):
            Run(tiny_dataset, cache, backbone, tmp_path / "wrong", Settings(steps=2, init_from=str(other)))
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        Run(tiny_dataset, cache, backbone, tmp_path / "none", Settings(steps=2, init_from=str(tmp_path)))


def test_the_first_episodes_only(tiny_dataset, cache):
    """--episodes N: the dataset's first N episodes (the recipe's clean ones, recorded before the pushed ones),
    their frames and maps only, so that no sampled chunk reaches into a later episode; N past the dataset's
    episodes is refused by name."""
    import pandas as pd

    whole = Demonstrations.load(tiny_dataset, cache, list(CAMERAS))
    first = Demonstrations.load(tiny_dataset, cache, list(CAMERAS), first_episodes=1)
    table = pd.concat(pd.read_parquet(p) for p in sorted((tiny_dataset / "data").glob("chunk-*/file-*.parquet")))
    length = int((table["episode_index"] == 0).sum())
    assert 0 < length < len(whole) and len(first) == length
    assert set(first.episode_end) == {length} and all(len(v) == length for v in first.maps.values())
    np.testing.assert_array_equal(first.action, whole.action[:length])
    np.testing.assert_array_equal(first.maps["front"], whole.maps["front"][:length])
    assert not first.batch(np.random.default_rng(0), 64)["action_is_pad"].all()
    with pytest.raises(ValueError, match="--episodes 3: .* has 2 episodes"):
        Demonstrations.load(tiny_dataset, cache, list(CAMERAS), first_episodes=3)


def test_the_act_command_averages_its_last_checkpoints(tiny_dataset, backbone, cache, tmp_path, capsys):
    """--average-last K: after the steps, OUT/average/pretrained_model is the mean of the last K checkpoints;
    run again when the steps are done it only averages; K = 1 and a checkpoint that is not there are refused."""
    from safetensors.torch import load_file

    from act_lab.vision.act_train import average_last, main

    def command(out: str, steps: int) -> list[str]:
        return ["--dataset", str(tiny_dataset), "--cache", str(cache), "--backbone", str(backbone), "--out",
                str(tmp_path / out), "--steps", str(steps), "--save-every", "2", "--batch-size", "2", "--no-cameras"]

    def assert_averaged(out: str, steps: tuple[int, ...]) -> None:
        """OUT/average holds the mean of the checkpoints at these steps, on every weight training moved."""
        folder = tmp_path / out
        weights = [load_file(str(folder / "checkpoints" / f"{step:06d}" / "pretrained_model" / "model.safetensors"))
                   for step in steps]
        mean = load_file(str(folder / "average" / "pretrained_model" / "model.safetensors"))
        moved = [key for key in mean if not torch.equal(weights[0][key], weights[-1][key])]
        assert moved
        for key in moved:
            torch.testing.assert_close(mean[key], sum(w[key] for w in weights) / len(weights))

    common = command("run", 6)
    main([*common, "--average-last", "3"])
    assert_averaged("run", (2, 4, 6))
    shutil.rmtree(tmp_path / "run" / "average")
    main([*common, "--average-last", "2"])  # nothing to train: averages the last two
    assert "nothing to do" in capsys.readouterr().out
    assert_averaged("run", (4, 6))
    with pytest.raises(FileNotFoundError, match="holds 3 up to step 6 \\(2, 4, 6\\)"):
        main([*common, "--average-last", "4"])
    with pytest.raises(SystemExit):
        main([*common, "--average-last", "1"])
    # steps not a multiple of --save-every: the run saves at 2, 4 and its last, 5; those three are averaged
    odd = command("odd", 5)
    main([*odd, "--average-last", "3"])
    assert_averaged("odd", (2, 4, 5))
    assert json.loads((tmp_path / "odd" / "run.json").read_text())["settings"]["lr"] is None
    # the run's last checkpoint missing: refused, naming it
    shutil.rmtree(tmp_path / "odd" / "checkpoints" / "000005")
    with pytest.raises(FileNotFoundError, match="no checkpoint at step 5"):
        average_last(tmp_path / "odd", 5, 2)
    with pytest.raises(SystemExit):
        main([*odd, "--lr", "0"])
    main([*command("slow", 2), "--lr", "1e-6"])
    assert json.loads((tmp_path / "slow" / "run.json").read_text())["settings"]["lr"] == 1e-6


def test_the_recipe_command_passes_its_counts_and_refuses_negative_ones(tmp_path, monkeypatch):
    from act_lab import cli
    from act_lab.recipe import Recipe

    seen = []
    monkeypatch.setattr(Recipe, "run", lambda self, only=None: seen.append(self.settings) or {"stages": {}})
    cli.main(["recipe", "--out", str(tmp_path), "--more-episodes", "7", "--episodes", "3"])
    assert (seen[0].episodes, seen[0].recovery_episodes, seen[0].more_episodes) == (3, 0, 7)
    cli.main(["recipe", "--out", str(tmp_path)])
    assert seen[1].more_episodes == 0  # 240 more measured no gain: not recorded unless asked
    with pytest.raises(SystemExit, match="--more-episodes -1: a count of demonstrations must be >= 0"):
        cli.main(["recipe", "--out", str(tmp_path), "--more-episodes", "-1"])


def test_the_training_device_is_checked_before_anything_loads(tiny_dataset, tmp_path, capsys):
    """--device: a device this machine lacks or torch does not know is refused by the parser, naming it, before
    any data loads; cpu trains as before. (A CUDA run is measured on a lent GPU, not in the tests.)"""
    from act_lab.vision.act_train import main, training_device

    assert training_device("cpu") == torch.device("cpu")
    common = ["--dataset", str(tmp_path / "no-such-dataset"), "--cache", "x", "--backbone", "x",
              "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit):
        main([*common, "--device", "tpu"])
    assert "--device 'tpu': not a torch device" in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            main([*common, "--device", "cuda"])
        error = capsys.readouterr().err
        assert "--device 'cuda': torch" in error and "sees no CUDA device" in error
    assert not (tmp_path / "out").exists()  # refused before the run's folder was made


def test_the_execution_is_written_into_the_checkpoints_and_does_not_change_training(tiny_dataset, tmp_path, capsys):
    """--temporal-ensemble-coeff C: every checkpoint's config.json says ACT's temporal ensembling with C and
    n_action_steps 1 (how lerobot-eval, act-sim eval and the graph then run it), and the weights are those of the
    same run without it; a coefficient that is not finite is refused before anything loads. An image-less run
    needs no --cache or --backbone; a camera run is refused without them."""
    from lerobot.policies.act.modeling_act import ACTPolicy
    from safetensors.torch import load_file

    from act_lab.vision.act_train import main

    def command(out: str) -> list[str]:
        return ["--dataset", str(tiny_dataset), "--out", str(tmp_path / out), "--steps", "2", "--save-every", "2",
                "--batch-size", "2", "--no-cameras"]

    main([*command("ensembled"), "--temporal-ensemble-coeff", "0.01"])
    main(command("chunks"))
    ensembled, chunks = (tmp_path / name / "checkpoints" / "000002" / "pretrained_model"
                         for name in ("ensembled", "chunks"))
    config = json.loads((ensembled / "config.json").read_text())
    assert (config["n_action_steps"], config["temporal_ensemble_coeff"]) == (1, 0.01)
    assert json.loads((chunks / "config.json").read_text())["temporal_ensemble_coeff"] is None
    assert ACTPolicy.from_pretrained(str(ensembled)).config.temporal_ensemble_coeff == 0.01
    first, second = (load_file(str(folder / "model.safetensors")) for folder in (ensembled, chunks))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    assert json.loads((tmp_path / "chunks" / "run.json").read_text())["backbone"] is None
    # a resume that would save checkpoints running otherwise than the first ones is refused; one pinned before the
    # ensembling was (no key), or an image-less one pinned with an unused backbone path, resumes
    with pytest.raises(SystemExit, match="holds a run with other settings"):
        main([*command("chunks"), "--temporal-ensemble-coeff", "0.05"])
    pin = tmp_path / "chunks" / "run.json"
    old = {k: v for k, v in json.loads(pin.read_text()).items() if k != "ensemble_coeff"}
    pin.write_text(json.dumps({**old, "backbone": "/tmp/none"}))
    main([*command("chunks"), "--steps", "4"])
    assert (tmp_path / "chunks" / "checkpoints" / "000004" / "pretrained_model").is_dir()
    # the same recording in another folder (a committed stage on a machine that recorded it again) goes on, pinned
    # to where it is now; with other settings it is still refused
    moved = tmp_path / "moved_data"
    shutil.copytree(tiny_dataset, moved)
    capsys.readouterr()
    with pytest.raises(SystemExit, match="holds a run with other settings"):
        main([*command("chunks"), "--dataset", str(moved), "--steps", "6", "--batch-size", "4"])
    main([*command("chunks"), "--dataset", str(moved), "--steps", "6"])
    assert f"it goes on with {moved.resolve()}" in capsys.readouterr().out
    assert json.loads(pin.read_text())["dataset"] == str(moved.resolve())
    assert (tmp_path / "chunks" / "checkpoints" / "000006" / "pretrained_model").is_dir()
    for bad in ("nan", "inf"):
        with pytest.raises(SystemExit):
            main([*command("bad"), "--temporal-ensemble-coeff", bad])
        assert "--temporal-ensemble-coeff must be a finite number" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([a for a in command("bad") if a != "--no-cameras"])
    assert "a camera ACT needs --cache and --backbone" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_the_yaw_recipe_is_the_shipped_checkpoints(tmp_path):
    """--kind yaw: record (wrist 24x32, the yaw reader's and the planned grasp's 19 numbers, 360 clean, then 240
    pushed off the plan), act
    (no cameras, batch 64, 30,000 steps, ensembled), curve and eval: no encoder or cache stage; a stage of the other
    kind and a folder holding the other kind's stages are refused; the eval stage is done only for a report of the
    average as it is now."""
    recipe = Recipe(tmp_path, RecipeSettings.of_kind("yaw"), python="python")
    assert recipe.stages == ("record", "act", "curve", "eval")
    record = recipe.command("record")
    assert record[record.index("--environment-state") + 1] == "target_tool_yaw_grasp"
    yaw_only = Recipe(tmp_path / "yaw_only", RecipeSettings.of_kind("yaw", environment_layout="target_tool_yaw"),
                      python="python").command("record")
    assert yaw_only[yaw_only.index("--environment-state") + 1] == "target_tool_yaw"
    with pytest.raises(ValueError, match="the yaw recipe records target_tool_yaw_grasp or target_tool_yaw"):
        RecipeSettings.of_kind("yaw", environment_layout="target_tool")
    assert record[record.index("--cameras") + 1] == "wrist" and "--raw-maps" not in record
    assert record[record.index("--episodes") + 1] == "360" and record[record.index("--first-seed") + 1] == "10000"
    write_info(tmp_path / "data", 300, layout_size=19)
    record = recipe.command("record")  # stopped at 300: the rest of the clean ones first
    assert "--resume" in record and record[record.index("--episodes") + 1] == "60" and "--action-noise" not in record
    write_info(tmp_path / "data", 360, layout_size=19)
    record = recipe.command("record")  # then the 240 pushed off the plan (DART; results/act_dart)
    assert "--resume" in record and record[record.index("--episodes") + 1] == "240"
    assert record[record.index("--action-noise") + 1] == "1.0"
    write_info(tmp_path / "data", 600, layout_size=19)
    assert recipe.command("record") is None
    act = recipe.command("act")
    assert "--no-cameras" in act and "--cache" not in act and "--backbone" not in act
    assert [act[act.index(flag) + 1] for flag in ("--steps", "--batch-size", "--save-every",
                                                  "--temporal-ensemble-coeff")] == ["30000", "64", "1000", "0.01"]
    assert "--device" not in act
    assert "--device" in Recipe(tmp_path, RecipeSettings.of_kind("yaw", device="cuda"), python="python").command("act")
    # the shipped default's size: half ACT's width under bf16 autocast (results/act_small)
    assert [act[act.index(flag) + 1] for flag in ("--dim-model", "--dim-feedforward")] == ["128", "512"]
    assert "--bf16" in act
    wide = Recipe(tmp_path, RecipeSettings.of_kind("yaw", dim_model=256, dim_feedforward=1024, bf16=False),
                  python="python").command("act")
    assert [wide[wide.index(flag) + 1] for flag in ("--dim-model", "--dim-feedforward")] == ["256", "1024"]
    assert "--bf16" not in wide
    cameras = Recipe(tmp_path / "cameras", RecipeSettings.of_kind("cameras", encoder="enc"), python="python")
    assert not {"--dim-model", "--dim-feedforward", "--bf16"} & set(cameras.command("act"))
    curve = recipe.command("curve")
    assert curve[curve.index("curve") + 1] == f"yaw={tmp_path / 'act'}"
    evaluation = recipe.command("eval")
    assert evaluation[evaluation.index("--policy.path") + 1] == str(tmp_path / "act" / "average" / "pretrained_model")
    assert [evaluation[evaluation.index(flag) + 1] for flag in ("--episodes", "--first-seed", "--objects")] == \
        ["200", "2000", "4"]
    assert "--resume" in evaluation  # a session's end mid-eval: the next run goes on from the finished episodes
    average = tmp_path / "act" / "average" / "pretrained_model"
    average.mkdir(parents=True)
    (average / "model.safetensors").write_bytes(b"")
    report = tmp_path / "eval" / "report.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"policy": str(average), "episodes": 50}))
    assert recipe.eval_state() == "stale"  # of other episodes
    report.write_text(json.dumps({"policy": str(average), "episodes": 200}))
    assert recipe.eval_state() == "done" and recipe.command("eval") is None
    newer = report.stat().st_mtime + 10
    import os
    os.utime(average / "model.safetensors", (newer, newer))  # averaged again since: the report is of the last one
    assert recipe.eval_state() == "stale" and recipe.command("eval") is not None
    report.write_text(json.dumps({"policy": str(average.relative_to(tmp_path)), "episodes": 200}))
    os.utime(report, (newer + 1, newer + 1))
    import contextlib
    with contextlib.chdir(tmp_path):  # the same average named from elsewhere: done, not run again
        assert recipe.eval_state() == "done"
    assert evaluation[evaluation.index("--policy.path") + 1] == str(average.resolve())
    with pytest.raises(ValueError, match="--no-environment-state: the yaw recipe's ACT takes no image"):
        RecipeSettings.of_kind("yaw", environment_state=False)
    with pytest.raises(ValueError, match="--eval-episodes 0: must be at least 1"):
        RecipeSettings.of_kind("yaw", eval_episodes=0)
    with pytest.raises(ValueError, match="stage 'cache' is not one of the yaw recipe's: record, act, curve, eval"):
        recipe.run(only=["cache"])
    with pytest.raises(ValueError, match="unknown recipe kind 'lidar'"):
        RecipeSettings.of_kind("lidar")
    # a yaw folder from before environment_layout was a setting: it recorded its one layout then, target_tool_yaw;
    # run with that layout, no change to note
    settings = RecipeSettings.of_kind("yaw", environment_layout="target_tool_yaw")
    write_info(tmp_path / "data", 600, layout_size=15)
    from dataclasses import asdict
    before = {k: v for k, v in asdict(settings).items() if k != "environment_layout"}
    (tmp_path / "recipe.json").write_text(json.dumps({"settings": before, "stages": {"record": {"done": True,
                                                                                                "seconds": 1}}}))
    import io
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        Recipe(tmp_path, settings, python="python").run(only=["record"])
    assert "settings changed" not in printed.getvalue() and "[record] done already" in printed.getvalue()
    (tmp_path / "recipe.json").write_text(json.dumps({"settings": {"kind": "cameras"},
                                                      "stages": {"record": {"done": True, "seconds": 1}}}))
    with pytest.raises(SystemExit, match="holds the cameras recipe's stages; the yaw recipe goes in another --out"):
        recipe.run(only=["eval"])


def test_the_recipe_command_takes_the_kinds_numbers(tmp_path, monkeypatch):
    from act_lab import cli

    seen = []
    monkeypatch.setattr(Recipe, "run", lambda self, only=None: seen.append(self.settings) or {"stages": {}})
    cli.main(["recipe", "--kind", "yaw", "--out", str(tmp_path)])
    yaw = seen[0]
    assert (yaw.kind, yaw.episodes, yaw.recovery_episodes, yaw.steps, yaw.batch_size, yaw.save_every,
            yaw.ensemble_coeff) == ("yaw", 360, 240, 30_000, 64, 1_000, 0.01)
    cli.main(["recipe", "--kind", "yaw", "--out", str(tmp_path), "--steps", "500", "--device", "cuda"])
    assert (seen[1].steps, seen[1].batch_size, seen[1].device) == (500, 64, "cuda")
    cli.main(["recipe", "--out", str(tmp_path)])
    cameras = seen[2]  # the image-less ACT's measured scale, with the images (results/act_scale)
    assert (cameras.kind, cameras.episodes, cameras.recovery_episodes, cameras.steps, cameras.batch_size,
            cameras.save_every, cameras.ensemble_coeff, cameras.environment_layout) == \
        ("cameras", 360, 0, 40_000, 64, 1_000, 0.01, "target_tool")
    assert yaw.environment_layout == "target_tool_yaw_grasp"
    assert (cameras.map_dropout, yaw.map_dropout) == (0.5, 0.0)  # results/act_cameras, "Dropout on the image maps"
    # the camera recipe's first run (results/act_cameras), as its README gives it
    cli.main(["recipe", "--out", str(tmp_path), "--episodes", "240", "--recovery-episodes", "120", "--steps", "30000",
              "--batch-size", "8", "--save-every", "2500", "--curve-every", "2", "--temporal-ensemble-coeff", "none",
              "--environment-layout", "target", "--map-dropout", "0"])
    first = seen[3]
    assert first.map_dropout == 0.0
    assert (first.episodes, first.recovery_episodes, first.steps, first.batch_size, first.save_every,
            first.curve_every, first.ensemble_coeff, first.environment_layout) == \
        (240, 120, 30_000, 8, 2_500, 2, None, "target")
    cli.main(["recipe", "--out", str(tmp_path), "--temporal-ensemble-coeff", "0.05"])
    assert seen[4].ensemble_coeff == 0.05
    for bad, message in ((["--temporal-ensemble-coeff", "often"], "--temporal-ensemble-coeff 'often': a number"),
                         (["--temporal-ensemble-coeff", "nan"], "--temporal-ensemble-coeff must be a finite number"),
                         (["--environment-layout", "target_tool_yaw"],
                          "--environment-layout target_tool_yaw: the cameras recipe records target_tool or target"),
                         (["--kind", "yaw", "--environment-layout", "target_tool"],
                          "--environment-layout target_tool: the yaw recipe records target_tool_yaw_grasp or "
                          "target_tool_yaw"),
                         (["--map-dropout", "1"], r"--map-dropout must be in \[0, 1\), got 1.0"),
                         (["--kind", "yaw", "--map-dropout", "0.5"], "the yaw recipe's ACT takes no image")):
        with pytest.raises(SystemExit, match=message):
            cli.main(["recipe", "--out", str(tmp_path), *bad])
    assert len(seen) == 5
    with pytest.raises(SystemExit, match="--encoder is the camera recipe's"):
        cli.main(["recipe", "--kind", "yaw", "--out", str(tmp_path), "--encoder", "models/tabletop_encoder"])
    with pytest.raises(SystemExit):
        cli.main(["recipe", "--kind", "lidar", "--out", str(tmp_path)])


def test_the_cvae_option_trains_acts_own_vae_and_lerobot_runs_it(tiny_dataset, tmp_path):
    """--vae: the same loop with ACT's CVAE on (LeRobot's own: a VAE encoder over the chunk, the KL term in the
    loss); the checkpoint says use_vae and LeRobot loads it and answers a chunk (its latent 0 at inference). The
    setting is pinned: a run does not switch it midway."""
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    from act_lab.vision.act_train import main

    run = Run(tiny_dataset, None, None, tmp_path / "vae", Settings(steps=2, batch_size=2, save_every=2,
                                                                     use_cameras=False, vae=True))
    _, losses = run.policy.forward(run.preprocessor(run.data.batch(np.random.default_rng(0), 2)))
    assert "kld_loss" in losses
    model = run.train(progress=False) / "pretrained_model"
    assert json.loads((model / "config.json").read_text())["use_vae"] is True
    loaded = ACTPolicy.from_pretrained(str(model)).eval()
    assert any(name.startswith("model.vae_encoder.") for name, _ in loaded.named_parameters())
    preprocessor, _ = make_pre_post_processors(loaded.config, pretrained_path=str(model))
    observation = {"observation.state": torch.from_numpy(run.data.state[:1]),
                   "observation.environment_state": torch.from_numpy(run.data.env[:1])}
    assert loaded.predict_action_chunk(preprocessor(observation)).shape == (1, 100, 6)
    plain = Run(tiny_dataset, None, None, tmp_path / "plain", Settings(steps=2, batch_size=2, use_cameras=False))
    assert not any(name.startswith("model.vae_encoder.") for name, _ in plain.policy.named_parameters())
    with pytest.raises(SystemExit, match="holds a run with other settings"):
        main(["--dataset", str(tiny_dataset), "--out", str(tmp_path / "vae"), "--steps", "4", "--save-every", "2",
              "--batch-size", "2", "--no-cameras"])


SLOW_RECORD = """#!/usr/bin/env python3
import json, signal, sys, time
from pathlib import Path
args = sys.argv[1:]
root = Path(args[args.index("--root") + 1])
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append("SIGTERM"))
signal.signal(signal.SIGINT, lambda *_: stop.append("SIGINT"))
import os
(root.parent / "started").write_text(str(os.getpid()))
while not stop:
    time.sleep(0.05)
time.sleep(1.0)  # finalizing: the recipe must wait for this, not kill it
(root.parent / "finalized").write_text(" ".join(stop))  # every stop it was sent
"""


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_a_stopped_recipe_keeps_its_seconds_and_lets_the_stage_finish(tmp_path, stop):
    """A stage's wall time is written while it runs (a session's end kills the recipe outright, and the card gives
    each stage's hours); a stop sent to the recipe alone (no terminal) reaches the stage's command once and is
    waited for (act-sim record finalizes its dataset then), and the recipe exits 128 + the signal, saying the same
    command goes on. While it runs, a second recipe in the same folder is refused."""
    import contextlib
    import os
    import signal
    import subprocess
    import sys
    import time

    fake = tmp_path / "python"
    fake.write_text(SLOW_RECORD)
    fake.chmod(0o755)
    out = tmp_path / "recipe"
    driver = ("import sys; from pathlib import Path; import act_lab.recipe as r; r.HEARTBEAT_S = 0.2; "
              "r.Recipe(Path(sys.argv[1]), r.RecipeSettings(episodes=1, recovery_episodes=0, encoder=sys.argv[2]), "
              "python=sys.argv[3]).run(only=['record'])")
    recipe = subprocess.Popen([sys.executable, "-c", driver, str(out), str(tmp_path), str(fake)],
                              stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # a few heartbeats
        seconds = json.loads((out / "recipe.json").read_text())["stages"]["record"]["seconds"]
        assert seconds >= 0.4  # written while the stage runs, not only at its end
        with pytest.raises(SystemExit, match="another act-lab recipe is running in"):
            Recipe(out, RecipeSettings(episodes=1, recovery_episodes=0, encoder=str(tmp_path)),
                   python=str(fake)).run(only=["encoder"])  # (without the lock: no backbone there, at once)
        recipe.send_signal(getattr(signal, stop))
        _, err = recipe.communicate(timeout=30)
    finally:  # neither process outlives the test, whatever failed
        recipe.kill()
        if (out / "started").exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int((out / "started").read_text() or 0), signal.SIGKILL)
    assert recipe.returncode == 128 + getattr(signal, stop)
    assert (out / "finalized").read_text() == stop  # the command ended its own way, told once
    assert f"{stop}: stage record stopped" in err and "the same command goes on" in err
    state = json.loads((out / "recipe.json").read_text())["stages"]["record"]
    assert state["seconds"] >= seconds + 1.0 and not state["done"]


def test_a_failing_recipe_stops_its_stage_and_a_full_disk_does_not(tmp_path):
    """run_stage_command: a heartbeat that cannot write says so and the stage runs to its end; any other failure
    of the recipe while a stage runs stops the stage's command and waits for it (not left training, orphaned)."""
    import sys
    import time

    from act_lab.recipe import run_stage_command

    def disk_full():
        raise OSError(28, "No space left on device")

    started = time.monotonic()
    code, signalled = run_stage_command([sys.executable, "-c", "import time; time.sleep(0.6)"], {}, lambda: None,
                                        heartbeat_s=0.1)
    assert (code, signalled) == (0, 0)
    calls = []
    code, _ = run_stage_command([sys.executable, "-c", "import time; time.sleep(0.6)"], {},
                                lambda: calls.append(1) or (len(calls) > 1 or disk_full()), heartbeat_s=0.1)
    assert code == 0 and len(calls) >= 3  # went on past the failed write, and the last time was written

    def broken():
        raise RuntimeError("the recipe's own bug")

    pid_file = tmp_path / "pid"
    child = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    with pytest.raises(RuntimeError, match="the recipe's own bug"):
        run_stage_command([sys.executable, "-c", child], {}, broken, heartbeat_s=0.5)
    assert time.monotonic() - started < 30
    import os
    with pytest.raises(ProcessLookupError):  # stopped and reaped
        os.kill(int(pid_file.read_text()), 0)


def test_a_refused_recipe_leaves_its_folder_as_it_was(tmp_path):
    """Data of another layout is refused before recipe.json is touched, by --stage act too, and data of the other
    kind names that kind."""
    from dataclasses import asdict

    old_settings = asdict(RecipeSettings())  # the camera kind's numbers before 7862d2a
    (tmp_path / "recipe.json").write_text(json.dumps({"settings": old_settings,
                                                      "stages": {"record": {"done": True, "seconds": 5.0}}}))
    write_info(tmp_path / "data", 360, 52_000)  # the first run's data: 10 numbers
    before = (tmp_path / "recipe.json").read_text()
    today = Recipe(tmp_path, RecipeSettings.of_kind("cameras", encoder=str(tmp_path)), python="python")
    with pytest.raises(SystemExit, match="holds environment_state layout target; these settings record target_tool"):
        today.run()
    with pytest.raises(SystemExit, match="holds environment_state layout target"):
        today.run(only=["act"])
    with pytest.raises(SystemExit, match="holds environment_state layout target"):
        today.command("act")
    assert (tmp_path / "recipe.json").read_text() == before
    write_info(tmp_path / "data", 360, 52_000, layout_size=15)
    with pytest.raises(SystemExit, match="the yaw recipe's data: --kind yaw, or another --out"):
        today.command("record")


def _trained_with_dropout(tiny_dataset, cache, backbone, tmp_path, **dropout: float):
    """Two steps without and with `dropout` (a Settings field) from the same seed: the weights must differ, the
    checkpoint's act_node_training.json pins the value and a resume without it is refused. Returns the plain run's
    weights and the dropout run's checkpoint folder."""
    (name, value), = dropout.items()
    plain = Run(tiny_dataset, cache, backbone, tmp_path / "plain", Settings(steps=2, batch_size=2, save_every=2))
    plain.train(progress=False)
    dropped = Run(tiny_dataset, cache, backbone, tmp_path / "dropped",
                  Settings(steps=2, batch_size=2, save_every=2, **dropout))
    dropped.train(progress=False)
    a, b = _weights(plain), _weights(dropped)
    assert any(not torch.equal(a[key], b[key]) for key in a), f"the same seed trained the same: no {name} applied"
    model = tmp_path / "dropped" / "checkpoints" / "000002" / "pretrained_model"
    assert json.loads((model / "act_node_training.json").read_text())[name] == value
    with pytest.raises(SystemExit, match="other settings"):
        Run(tiny_dataset, cache, backbone, tmp_path / "dropped", Settings(steps=4, batch_size=2, save_every=2))
    return a, model


def test_map_dropout_drops_the_cached_maps_in_training_only_and_is_pinned(tiny_dataset, backbone, cache, tmp_path):
    """--map-dropout P: the cached maps go into ACT's image projection with dropout while training; a checkpoint runs
    the real backbone's maps whole; the run pins P (a resume with another is refused) and a bad P is refused."""
    from safetensors.torch import load_file

    maps = torch.ones(4, 512, 3, 4)
    dropping = CachedMaps(0.5)
    seen = dropping(maps)["feature_map"]
    zeroed = float((seen == 0).float().mean())
    assert 0.4 < zeroed < 0.6 and torch.all((seen == 0) | (seen == 2.0))  # kept ones scaled by 1 / (1 - p)
    assert torch.equal(dropping.eval()(maps)["feature_map"], maps)
    assert torch.equal(CachedMaps()(maps)["feature_map"], maps)

    a, model = _trained_with_dropout(tiny_dataset, cache, backbone, tmp_path, map_dropout=0.5)
    projection = [key for key in a if "input_proj" in key or "backbone" in key]
    saved = load_file(str(model / "model.safetensors"))
    assert all(torch.equal(saved[key], value) for key, value in load_file(str(backbone)).items())  # the real one
    assert projection
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="--map-dropout"):
            Settings(map_dropout=bad)
    with pytest.raises(ValueError, match="image-less"):
        Settings(map_dropout=0.2, use_cameras=False)


def test_camera_dropout_zeroes_whole_maps_per_sample_in_training_only_and_is_pinned(tiny_dataset, backbone, cache,
                                                                                    tmp_path):
    """--camera-dropout P: in training a sample's map of a camera is zeroed whole (not rescaled) with probability P,
    the other samples' maps go in unchanged; in eval mode nothing is dropped; the run pins P; bad values refused."""
    torch.manual_seed(0)
    maps = torch.rand(400, 512, 3, 4) + 0.5
    seen = CachedMaps(camera_dropout=0.5)(maps)["feature_map"]
    whole = (seen == 0).flatten(1).all(1)
    assert 0.4 < float(whole.float().mean()) < 0.6  # about half of the samples lost this camera
    assert torch.equal(seen[~whole], maps[~whole])  # the rest whole and unscaled
    assert torch.equal(CachedMaps(camera_dropout=0.5).eval()(maps)["feature_map"], maps)

    _trained_with_dropout(tiny_dataset, cache, backbone, tmp_path, camera_dropout=0.9)
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="--camera-dropout"):
            Settings(camera_dropout=bad)
    with pytest.raises(ValueError, match="--camera-dropout drops the image maps"):
        Settings(camera_dropout=0.2, use_cameras=False)


def test_a_smaller_act_in_bf16_trains_float32_weights_that_lerobot_loads(tiny_dataset, backbone, cache, tmp_path):
    """--dim-model/--dim-feedforward size ACT's transformer; --bf16 runs the forward pass under bfloat16 autocast
    (what a layer is given is bf16) while the weights, the optimizer and the checkpoint stay float32; the run pins
    both (a resume with others is refused) and a width that does not split into the heads is refused."""
    from lerobot.policies.act.modeling_act import ACTPolicy
    from safetensors.torch import load_file

    def trained(out, **sizes):
        run = Run(tiny_dataset, cache, backbone, out, Settings(steps=2, batch_size=2, save_every=2,
                                                               use_cameras=False, **sizes))
        seen = []
        layer = run.policy.model.encoder.layers[0].linear1
        handle = layer.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
        run.train(progress=False)
        handle.remove()
        return run, seen

    run, seen = trained(tmp_path / "small", dim_model=64, dim_feedforward=128, bf16=True)
    assert seen and set(seen) == {torch.bfloat16}
    model = tmp_path / "small" / "checkpoints" / "000002" / "pretrained_model"
    config = json.loads((model / "config.json").read_text())
    assert (config["dim_model"], config["dim_feedforward"]) == (64, 128)
    assert {tensor.dtype for tensor in load_file(str(model / "model.safetensors")).values()} == {torch.float32}
    loaded = ACTPolicy.from_pretrained(str(model)).eval()
    assert loaded.model.encoder.layers[0].linear1.weight.shape == (128, 64)
    _, plain = trained(tmp_path / "plain")
    assert set(plain) == {torch.float32}
    with pytest.raises(SystemExit, match="other settings"):
        Run(tiny_dataset, cache, backbone, tmp_path / "small",
            Settings(steps=4, batch_size=2, save_every=2, use_cameras=False, dim_model=64, dim_feedforward=128))
    with pytest.raises(ValueError, match="multiple of ACT's 8 heads"):
        Run(tiny_dataset, cache, backbone, tmp_path / "odd", Settings(steps=2, batch_size=2, use_cameras=False,
                                                                      dim_model=60))
    with pytest.raises(ValueError, match="--dim-model"):
        Settings(dim_model=-8)
