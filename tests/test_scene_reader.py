"""The scene reader's geometry, decoding, files and calibration, without ROS (act_node.perception.scene and
.calibration); the node is tested in test_scene_reader_node.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from act_node.perception.calibration import Board, calibrate_board, calibrate_points, pose_error, sim_board_image
from act_node.perception.scene import (
    HALF_HEIGHT_M,
    KIND_NAMES,
    STRIDE,
    TURNS,
    CameraCalibration,
    ReaderConfig,
    SceneReader,
    SeenObject,
    decode,
    network,
    table_yaw,
)


def test_half_heights_and_turns_are_the_table_tops_kinds():
    from act_node.tabletop.objects import KINDS

    assert set(HALF_HEIGHT_M) == set(KINDS) == set(KIND_NAMES)
    for name, kind in KINDS.items():
        assert HALF_HEIGHT_M[name] == pytest.approx(kind.height_m / 2)
        assert TURNS[name] == kind.grasp_turns


def test_a_table_point_projected_and_read_back_lands_where_it_was():
    calibration = CameraCalibration.of_sim(96, 128)
    rng = np.random.default_rng(0)
    points = np.c_[rng.uniform(0.3, 0.7, 20), rng.uniform(0.1, 0.35, 20), rng.uniform(0.0, 0.04, 20)]
    pixels = calibration.to_image(points)
    back = calibration.to_table(pixels, points[:, 2])
    np.testing.assert_allclose(back, points[:, :2], atol=1e-9)
    # a wrong height lands elsewhere: the plane matters
    assert np.max(np.abs(calibration.to_table(pixels, points[:, 2] + 0.02) - points[:, :2])) > 0.01


def test_the_sim_calibration_projects_as_the_renderer_draws():
    """The sim's front camera through CameraCalibration and through pybullet's matrices put a point at the same
    pixel (the labels the reader is trained on come from the latter)."""
    from act_lab.vision.labels import project
    from act_node.tabletop.cameras import CAMERAS, CameraSpec, look_at

    spec = CameraSpec("front", 96, 128, **CAMERAS["front"])
    eye = np.array(spec.eye)
    point = np.array([[0.45, 0.22, 0.02]])
    expected, _ = project(point, eye, look_at(eye, np.array(spec.target)), spec.intrinsics())
    np.testing.assert_allclose(CameraCalibration.of_sim(96, 128).to_image(point), expected, atol=1e-9)


def test_scaling_a_calibration_scales_its_pixels():
    small, large = CameraCalibration.of_sim(96, 128), CameraCalibration.of_sim(96, 128).scaled(480, 640)
    point = np.array([[0.5, 0.2, 0.01]])
    np.testing.assert_allclose(large.to_image(point), small.to_image(point) * 5, atol=1e-9)
    np.testing.assert_allclose(large.intrinsics, CameraCalibration.of_sim(480, 640).intrinsics, atol=1e-9)


def test_a_calibration_file_round_trips_and_bad_ones_are_refused(tmp_path):
    calibration = CameraCalibration.of_sim(96, 128)
    calibration.save(tmp_path / "front.json", source="test")
    loaded = CameraCalibration.load(tmp_path / "front.json")
    np.testing.assert_allclose(loaded.rotation, calibration.rotation)
    assert loaded.size == (96, 128)
    with pytest.raises(FileNotFoundError, match="act-sim calibrate"):
        CameraCalibration.load(tmp_path / "missing.json")
    data = json.loads((tmp_path / "front.json").read_text())
    data["rotation"] = [[2, 0, 0], [0, 1, 0], [0, 0, 1]]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="bad.json.*not a rotation"):
        CameraCalibration.load(tmp_path / "bad.json")
    del data["position"]
    (tmp_path / "short.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="short.json.*position"):
        CameraCalibration.load(tmp_path / "short.json")


def test_decode_reads_each_kinds_peak_offset_and_axis():
    kinds = len(KIND_NAMES)
    maps = np.zeros((5 * kinds, 48, 64), np.float32)
    pen = KIND_NAMES.index("pen")
    maps[pen, 10, 20] = 0.9
    maps[pen, 10, 21] = 0.5
    maps[kinds + 2 * pen, 10, 20], maps[kinds + 2 * pen + 1, 10, 20] = 0.25, 0.75
    phi = math.radians(30)
    maps[3 * kinds + 2 * pen, 10, 20], maps[3 * kinds + 2 * pen + 1, 10, 20] = math.cos(2 * phi), math.sin(2 * phi)
    score, pixels, angles = decode(maps)
    assert score[pen] == pytest.approx(0.9)
    np.testing.assert_allclose(pixels[pen], [(20 + 0.25) * STRIDE, (10 + 0.75) * STRIDE])
    assert angles[pen] == pytest.approx(phi)
    assert np.all(score[np.arange(kinds) != pen] == 0)


def test_table_yaw_follows_the_axis_on_the_table():
    calibration = CameraCalibration.of_sim(96, 128)
    for yaw in (0.2, 1.0, 2.5):
        centre = np.array([0.5, 0.2, HALF_HEIGHT_M["pen"]])
        ends = calibration.to_image(np.stack([centre, centre + 0.01 * np.array([math.cos(yaw), math.sin(yaw), 0])]))
        phi = math.atan2(*(ends[1] - ends[0])[::-1])
        assert table_yaw(calibration, ends[0], phi, "pen") == pytest.approx(yaw % math.pi, abs=1e-6)
    assert table_yaw(calibration, np.array([60.0, 40.0]), 0.3, "ball") == 0.0


def test_a_reader_saved_loads_and_reads_the_same(tmp_path):
    reader = SceneReader(network(8), ReaderConfig(width=8))
    reader.save(tmp_path / "reader")
    loaded = SceneReader.load(tmp_path / "reader")
    image = np.random.default_rng(1).integers(0, 255, (2, 96, 128, 3), dtype=np.uint8)
    np.testing.assert_allclose(loaded.maps(image), reader.maps(image), atol=1e-6)
    with pytest.raises(ValueError, match=r"reads \(B, 96, 128, 3\)"):
        reader.maps(image[:, :50])


def test_a_wrong_reader_folder_is_refused_with_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="reader.json is missing"):
        SceneReader.load(tmp_path)
    SceneReader(network(8), ReaderConfig(width=8)).save(tmp_path / "r")
    config = json.loads((tmp_path / "r" / "reader.json").read_text())
    (tmp_path / "r" / "reader.json").write_text(json.dumps({**config, "width": 16}))
    with pytest.raises(ValueError, match="does not fit the reader network of width 16"):
        SceneReader.load(tmp_path / "r")
    (tmp_path / "r" / "reader.json").write_text(json.dumps({**config, "kind": "selector"}))
    with pytest.raises(ValueError, match="not a scene reader"):
        SceneReader.load(tmp_path / "r")


def test_any_image_size_is_resized_to_the_readers():
    reader = SceneReader(network(8), ReaderConfig(width=8))
    image = np.zeros((480, 640, 3), np.uint8)
    assert reader.prepare(image).shape == (96, 128, 3)
    with pytest.raises(ValueError, match="uint8"):
        reader.prepare(image.astype(np.float32))


def test_the_sim_cameras_calibration_from_a_chessboard_matches_its_pose():
    """act-sim calibrate --sim: a board drawn on the sim's table, found and solved with OpenCV's PnP, gives the
    front camera's known pose."""
    board = Board()
    image = sim_board_image(board)
    calibration, rms = calibrate_board(image, CameraCalibration.of_sim(480, 640).intrinsics, board)
    position_m, angle_deg = pose_error(calibration, CameraCalibration.of_sim(480, 640))
    assert rms < 1.0
    assert position_m < 0.005 and angle_deg < 0.3


def test_a_board_turned_half_round_is_read_in_its_true_orientation():
    board = Board(origin=(0.59, 0.23), yaw_deg=180.0)  # the same squares as Board(), named from the other end
    calibration, _ = calibrate_board(sim_board_image(board), CameraCalibration.of_sim(480, 640).intrinsics, board)
    position_m, angle_deg = pose_error(calibration, CameraCalibration.of_sim(480, 640))
    assert position_m < 0.005 and angle_deg < 0.3


def test_bad_boards_and_too_few_points_are_refused():
    with pytest.raises(ValueError, match="one count odd and one even"):
        Board(7, 5)
    with pytest.raises(ValueError, match="COLSxROWS"):
        Board.parse("seven", 0.03, "0.4,0.1", 0.0)
    with pytest.raises(ValueError, match="X,Y"):
        Board.parse("7x4", 0.03, "0.4", 0.0)
    with pytest.raises(ValueError, match="4 or more"):
        calibrate_points(np.zeros((3, 2)), np.zeros((3, 3)), np.eye(3), (96, 128))
    with pytest.raises(ValueError, match="no 7x4 chessboard found"):
        calibrate_board(np.full((96, 128, 3), 128, np.uint8), np.eye(3), Board())


def _reader(threshold: float) -> SceneReader:
    return SceneReader(network(8), ReaderConfig(width=8, threshold=threshold))


def test_with_scene_cameras_the_target_comes_from_the_reading_never_from_the_simulators_objects(monkeypatch):
    """scene cameras: the env's reset reads the front camera and the Selector reads that; the simulator's objects
    are not asked (object_states raises) and the target is where the reader put the requested kind."""
    from act_node.tabletop.env import PickObjectEnv
    from act_node.tabletop.task import PickTask

    class PlacedReader:  # reads every kind at a place of its own, whatever the image shows
        config = ReaderConfig()
        images: list = []

        def read(self, image, calibration=None):
            self.images.append(image)
            return [SeenObject(kind, 0.3 + 0.05 * i, 0.1 + 0.02 * i, 0.0, 0.9, 0.0, 0.0)
                    for i, kind in enumerate(KIND_NAMES)]

    reader = PlacedReader()
    env = PickObjectEnv(objects=4, cameras=("front",), scene="cameras", scene_reader=reader)
    try:
        def truth_asked(self):
            raise AssertionError("the simulator's objects were read with scene cameras")

        with monkeypatch.context() as patch:
            patch.setattr(PickTask, "object_states", truth_asked)
            env.reset(seed=2000)
        seen = {o.kind: (o.x, o.y) for o in env.seen}
        np.testing.assert_allclose(env.target.xy, seen[env.scene.request], atol=0.005)  # the Selector's attention
        assert [image.shape for image in reader.images] == [(96, 128, 3)]  # the front camera, once, at reset
    finally:
        env.close()


def test_a_requested_kind_the_reader_misses_leaves_no_target_and_ends_the_episode_unseen():
    from act_node.episodes import Rollout
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=4, cameras=("front",), scene="cameras", scene_reader=_reader(1.01))
    try:
        class Still:
            calls = 0

            def reset(self, observation):
                raise AssertionError("an agent was started without a target")

        rollout = Rollout(env, Still(), 2000)
        assert np.all(np.isnan(env.target.xy)) and not env.target.selector_found
        result = rollout.result()
        assert rollout.finished and not result.success and result.outcome == "target_not_seen"
    finally:
        env.close()


def test_scene_cameras_needs_a_reader_and_the_selector():
    from act_node.tabletop.env import PickObjectEnv

    with pytest.raises(ValueError, match="give scene_reader="):
        PickObjectEnv(objects=4, scene="cameras")
    with pytest.raises(ValueError, match="target_source 'selector'"):
        PickObjectEnv(objects=4, scene="cameras", scene_reader=_reader(0.5), target_source="truth")
    with pytest.raises(ValueError, match="scene must be one of"):
        PickObjectEnv(objects=4, scene="pixels")
