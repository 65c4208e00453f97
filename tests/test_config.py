"""GraphConfig: checked when made, and its launch arguments make the same config again."""

import pytest

from act_node.config import GraphConfig


def test_launch_arguments_round_trip_to_the_same_config():
    config = GraphConfig(cameras="front", max_velocity=1e9, lockstep_timeout_s=3600.0, record_video=False,
                         video_dir="/tmp/results", objects=6, clock="realtime")
    arguments = config.to_arguments()
    assert arguments["cameras"] == "front" and arguments["record_video"] == "false"
    assert GraphConfig.from_arguments(arguments) == config


def test_bad_values_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="objects must be at most 8, got 9"):
        GraphConfig(objects=9)
    with pytest.raises(ValueError, match="launch argument objects:='four' is not a int"):
        GraphConfig.from_arguments({"objects": "four"})
    with pytest.raises(ValueError, match="unknown launch arguments"):
        GraphConfig.from_arguments({"polcy": "act"})


def fake_checkpoint(folder, cameras=("front",), dataset_root=None):
    """A pretrained_model folder as far as the renderer's choice reads it: config.json's input features and,
    with `dataset_root`, the train_config.json that names its dataset."""
    import json

    folder.mkdir(parents=True)
    features = {f"observation.images.{c}": {"type": "VISUAL", "shape": [3, 48, 64]} for c in cameras}
    features["observation.state"] = {"type": "STATE", "shape": [6]}
    (folder / "config.json").write_text(json.dumps({"input_features": features, "n_action_steps": 30}))
    if dataset_root is not None:
        (folder / "train_config.json").write_text(json.dumps({"dataset": {"root": str(dataset_root)}}))
    return folder


def test_auto_draws_a_camera_checkpoint_with_its_datasets_renderer(tmp_path):
    from act_node.checkpoints import RENDERER_FILE, checkpoint_renderer, write_renderer

    dataset = tmp_path / "data"
    (dataset / "meta").mkdir(parents=True)
    (dataset / "meta" / "info.json").write_text("{}")
    model = fake_checkpoint(tmp_path / "model", dataset_root=dataset)

    def chosen(renderer="auto") -> str:
        return GraphConfig(policy="act", checkpoint=str(model), renderer=renderer).sim_renderer()

    # a dataset recorded before datasets said what drew them: every one was drawn with TinyRenderer
    assert checkpoint_renderer(model) == "tiny" and chosen() == "tiny"
    write_renderer(dataset / "meta", "egl")
    assert chosen() == "egl" and chosen("tiny") == "tiny"  # what the user names stands
    write_renderer(model, "tiny")  # the checkpoint's own record (act-sim train's copy) wins over the dataset's
    assert chosen() == "tiny"
    (model / RENDERER_FILE).unlink()
    dataset.joinpath("meta", "info.json").unlink()
    (dataset / "meta" / RENDERER_FILE).unlink()
    assert checkpoint_renderer(model) is None and chosen() == "tiny"  # its dataset is not here: TinyRenderer
    # no images to match: auto stays auto, and the world draws with EGL where it loads
    assert GraphConfig(policy="act", checkpoint=str(fake_checkpoint(tmp_path / "state", cameras=()))).sim_renderer() \
        == "auto"
    assert GraphConfig(policy="expert").sim_renderer() == "auto"
    assert GraphConfig(policy="act", checkpoint=str(model)).env_kwargs()["renderer"] == "tiny"


def test_a_renderer_chosen_against_the_checkpoint_is_named_and_a_broken_record_refused(tmp_path):
    from act_node.checkpoints import RENDERER_FILE, write_renderer

    model = fake_checkpoint(tmp_path / "model")
    write_renderer(model, "egl")
    warning = GraphConfig(policy="act", checkpoint=str(model), renderer="tiny").renderer_mismatch()
    assert "renderer 'tiny'" in warning and "drawn with 'egl'" in warning and "renderer at auto" in warning
    assert GraphConfig(policy="act", checkpoint=str(model), renderer="egl").renderer_mismatch() is None
    assert GraphConfig(policy="act", checkpoint=str(model)).renderer_mismatch() is None
    (model / RENDERER_FILE).write_text('{"renderer": "opengl"}')
    with pytest.raises(ValueError, match="names renderer 'opengl'"):
        GraphConfig(policy="act", checkpoint=str(model)).sim_renderer()
    with pytest.raises(ValueError, match="renderer must be one of auto, tiny, egl, got 'opengl'"):
        GraphConfig(renderer="opengl")
