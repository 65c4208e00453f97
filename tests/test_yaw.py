"""The yaw reader (act_node.perception.yaw) and environment_state's target_tool_yaw layout, which it fills."""

import json
import math
import shutil

import numpy as np
import pytest

from act_lab.vision.yaw import yaw_error_deg
from act_node.observation import ENV_LAYOUTS, environment_layout, environment_state, environment_state_names
from act_node.paths import models_dir
from act_node.perception.yaw import READER_CAMERAS, READER_IMAGE_SIZE, YawReader, kind_turns, symmetric_yaw


@pytest.fixture(scope="module")
def reader():
    return YawReader.load()


def pen_scene(seed: int, layout: str = "target", reader=None):
    """A 4-object scene whose request is the pen: (env, the pen's true yaw)."""
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=4, cameras=READER_CAMERAS, image_size=READER_IMAGE_SIZE, target_source="truth",
                        request="pen", environment_layout=layout, yaw_reader=reader)
    observation, _ = env.reset(seed=seed)
    (pen,) = [s for s in env.table.task.object_states() if s.kind == "pen"]
    return env, observation, pen.yaw


def test_the_layout_is_fifteen_numbers_ending_in_the_symmetric_yaw():
    names = environment_state_names("target_tool_yaw")
    assert len(names) == 15 and names[:13] == environment_state_names("target_tool")
    assert environment_layout(15) == "target_tool_yaw" and ENV_LAYOUTS[2] == "target_tool_yaw"
    state = environment_state((0.4, 0.3), "pen", (0.5, 0.1, 0.2), "target_tool_yaw", symmetric_yaw("pen", 0.3))
    assert state[-2:] == pytest.approx([math.cos(0.6), math.sin(0.6)], abs=1e-6)
    assert state[10:13] == pytest.approx([0.1, -0.2, 0.2], abs=1e-6)
    # a pen turned half a turn lies the same way; the cube a quarter; a ball has no yaw
    assert symmetric_yaw("pen", 0.3 + math.pi) == pytest.approx(symmetric_yaw("pen", 0.3), abs=1e-6)
    assert symmetric_yaw("cube", 0.3 + math.pi / 2) == pytest.approx(symmetric_yaw("cube", 0.3), abs=1e-6)
    assert not np.any(symmetric_yaw("ball", 0.3)) and kind_turns("ball") == 0
    assert yaw_error_deg(symmetric_yaw("pen", 0.1), symmetric_yaw("pen", 0.1 + math.radians(10) + math.pi), 2) == \
        pytest.approx(10, abs=1e-3)
    for bad in (None, [1.0], [np.nan, 0.0]):
        with pytest.raises(ValueError, match="needs the requested object's yaw"):
            environment_state((0.4, 0.3), "pen", (0.5, 0.1, 0.2), "target_tool_yaw", bad)


def test_the_reader_reads_how_a_pen_lies_from_the_two_cameras(reader):
    """On scenes it never saw (the evaluation seeds), a pen's yaw within 15 degrees in at least 5 of 6; held out
    in its own measurement the median error is 2.5 degrees (models/yaw_reader/reader.json)."""
    errors = []
    for seed in range(2000, 2006):
        env, observation, truth = pen_scene(seed)
        read = reader.read(observation["pixels"], "pen")
        assert read.shape == (2,) and np.linalg.norm(read) == pytest.approx(1.0, abs=1e-5)
        errors.append(float(yaw_error_deg(read, symmetric_yaw("pen", truth), 2)))
        env.close()
    assert sum(error < 15 for error in errors) >= 5, errors
    assert not np.any(reader.read(observation["pixels"], "ball"))  # round: nothing to read


@pytest.mark.parametrize("size", [(120, 160), (480, 640)])
def test_the_reader_reads_a_camera_of_another_size_resized_as_lerobot_resizes(reader, size):
    """The same cameras drawn at 120x160 and 480x640 (a real camera's size) read the pen's yaw as at 96x128: each frame
    is resized to the reader's size first (act_node.policy.resized_frame, LeRobot's resize step)."""
    from act_node.policy import resized_frame
    from act_node.tabletop.cameras import CameraRig, camera_specs

    for seed in (2000, 2001, 2002):
        env, observation, truth = pen_scene(seed)
        rig = CameraRig(env.table.world, env.table.robot, camera_specs(READER_CAMERAS, *size))
        frames = rig.render()
        assert frames["front"].shape == (*size, 3) and resized_frame(frames["front"], READER_IMAGE_SIZE).shape == \
            (*READER_IMAGE_SIZE, 3)
        at_size, at_reader = reader.read(frames, "pen"), reader.read(observation["pixels"], "pen")
        assert yaw_error_deg(at_size, at_reader, 2) < 10, (seed, size)
        assert yaw_error_deg(at_size, symmetric_yaw("pen", truth), 2) < 15, (seed, size)
        env.close()
    frame = observation["pixels"]["front"]
    assert resized_frame(frame, READER_IMAGE_SIZE) is frame  # the trained size: as it is


def test_the_env_reads_the_yaw_at_reset_and_holds_it(reader):
    env, observation, truth = pen_scene(2003, "target_tool_yaw", reader)
    state = observation["environment_state"]
    assert state.shape == (15,) and env.observation_space["environment_state"].contains(state)
    assert state[-2:] == pytest.approx(reader.read(observation["pixels"], "pen"), abs=1e-6)
    assert yaw_error_deg(state[-2:], symmetric_yaw("pen", truth), 2) < 15
    # the arm moves (the wrist camera with it): the yaw stays the one read before anything moved
    for _ in range(20):
        observation, *_ = env.step(env.action_space.high * 0.5)
    assert observation["environment_state"][-2:] == pytest.approx(state[-2:], abs=1e-7)
    env.close()


def test_a_reader_without_its_files_or_with_another_backbone_is_refused_naming_why(tmp_path, reader):
    with pytest.raises(FileNotFoundError, match="no reader.json"):
        YawReader.load(tmp_path)
    shutil.copytree(models_dir() / "yaw_reader", tmp_path / "r")
    about = json.loads((tmp_path / "r" / "reader.json").read_text())
    (tmp_path / "r" / "reader.json").write_text(json.dumps({**about, "backbone_sha256": "0" * 64}))
    with pytest.raises(ValueError, match="trained on another backbone"):
        YawReader.load(tmp_path / "r")
    (tmp_path / "r" / "reader.json").write_text(json.dumps({**about, "backbone": "nowhere/backbone.safetensors"}))
    with pytest.raises(FileNotFoundError, match="its backbone .*nowhere/backbone.safetensors is missing"):
        YawReader.load(tmp_path / "r")
    images = {c: np.zeros((*READER_IMAGE_SIZE, 3), np.uint8) for c in READER_CAMERAS}
    with pytest.raises(ValueError, match="needs the 'wrist' camera's image"):
        reader.read({"front": images["front"]}, "pen")
    with pytest.raises(ValueError, match=r"reads 'front' images of \(H, W, 3\) uint8, got \(96, 128\) uint8"):
        reader.read({**images, "front": np.zeros(READER_IMAGE_SIZE, np.uint8)}, "pen")
    with pytest.raises(ValueError, match=r"got \(96, 128, 3\) float32"):
        reader.read({**images, "front": np.zeros((*READER_IMAGE_SIZE, 3), np.float32)}, "pen")
    with pytest.raises(ValueError, match="unknown object kind 'spoon'"):
        reader.read(images, "spoon")


def test_recordings_of_streams_refuse_the_layout_naming_act_sim_record(tmp_path):
    from act_node.nodes.graph import describe
    from act_node.recording import RecorderSettings

    with pytest.raises(ValueError, match="act-sim record --environment-state target_tool_yaw"):
        RecorderSettings(root=tmp_path / "d", environment_layout="target_tool_yaw")
    with pytest.raises(ValueError, match="act-sim record records target_tool_yaw"):
        describe(policy="expert", record=str(tmp_path / "data"), environment_layout="target_tool_yaw")


def test_a_graph_of_the_yaw_checkpoint_runs_at_any_camera_size_and_without_its_cameras_is_refused():
    from act_node.nodes.graph import describe

    checkpoint = str(models_dir() / "act_target_tool_yaw")
    nodes = describe(policy="act", checkpoint=checkpoint)
    (sim,) = [node for node in nodes if node.name == "act_sim"]
    assert (sim.parameters["image_height"], sim.parameters["image_width"]) == READER_IMAGE_SIZE
    assert set(READER_CAMERAS) <= set(sim.parameters["cameras"])
    for size in ((120, 160), (480, 640)):  # any size: the policy node resizes each frame to the reader's
        nodes = describe(policy="act", checkpoint=checkpoint, image_height=str(size[0]), image_width=str(size[1]))
        (sim,) = [node for node in nodes if node.name == "act_sim"]
        assert (sim.parameters["image_height"], sim.parameters["image_width"]) == size
    with pytest.raises(ValueError, match="reads the requested object's yaw from cameras front,wrist .*the graph "
                                         "has cameras front: give cameras with front,wrist"):
        describe(policy="act", checkpoint=checkpoint, cameras="front")
    # a person drives a teleoperated graph: no policy node, so any size records
    nodes = describe(teleop="leader", leader_port="/dev/leader", image_height="240", image_width="320")
    assert "act_policy" not in [node.name for node in nodes]


def test_an_arms_camera_node_sizes_its_frames_for_the_yaw_reader():
    from act_node.nodes.camera_node import checkpoint_image_size

    checkpoint = models_dir() / "act_target_tool_yaw"
    assert checkpoint_image_size(checkpoint, "wrist") == READER_IMAGE_SIZE
    with pytest.raises(ValueError, match="has no camera 'top'"):
        checkpoint_image_size(checkpoint, "top")
    with pytest.raises(ValueError, match="has no camera 'front'"):
        checkpoint_image_size(models_dir() / "act_target_tool", "front")  # 13 numbers: nothing reads a camera


def test_the_env_takes_its_reader_from_above_and_says_where_without_one(reader):
    """The table-top stands below the vision package, so the env is handed the reader (act_node.envs does it
    for the package's commands) and refuses the layout without one, naming where to get it."""
    from act_node.envs import make_env
    from act_node.tabletop.env import PickObjectEnv

    with pytest.raises(ValueError, match="give yaw_reader=.*act_node.envs.make_env"):
        PickObjectEnv(objects=2, cameras=("wrist",), image_size=(24, 32), environment_layout="target_tool_yaw")
    env = make_env(objects=2, cameras=("wrist",), image_size=(24, 32), environment_layout="target_tool_yaw")
    observation, _ = env.reset(seed=5)
    assert observation["environment_state"].shape == (15,) and env.yaw_reader is not None
    env.close()
