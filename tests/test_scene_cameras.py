"""scene:=cameras end to end with the shipped scene reader (models/scene_reader): the graph picks with the target
read from the front camera, and that target is the in-process evaluation's, seed for seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from act_node.perception.scene import CameraCalibration, SceneReader

SEED = 2001  # a pen among three others


@pytest.fixture(scope="module")
def reader():
    return SceneReader.load(threads=1)


def test_the_shipped_reader_finds_a_scenes_objects_within_a_centimetre(reader):
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=6, cameras=("front",), scene="cameras", scene_reader=reader)
    try:
        env.reset(seed=SEED)
        truth = {o.kind: o.position[:2] for o in env.table.task.object_states()}
        seen = {o.kind: np.array([o.x, o.y]) for o in env.seen}
        assert set(seen) == set(truth)
        for kind, xy in seen.items():
            assert np.hypot(*(xy - truth[kind])) < 0.01, kind
    finally:
        env.close()


def test_a_frame_of_another_size_reads_the_same_scene(reader):
    """The graph's camera may publish another size (240x320 by default): the reader resizes it."""
    from act_node.tabletop.cameras import CameraRig, camera_specs
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=4, cameras=("front",), scene="cameras", scene_reader=reader)
    try:
        env.reset(seed=SEED)
        large = CameraRig(env.table.world, env.table.robot, camera_specs(("front",), 240, 320)).render()["front"]
        seen = {o.kind: np.array([o.x, o.y]) for o in reader.read(large, CameraCalibration.of_sim(240, 320))}
        truth = {o.kind: o.position[:2] for o in env.table.task.object_states()}
        assert set(seen) == set(truth)
        assert max(np.hypot(*(seen[k] - truth[k])) for k in seen) < 0.015
    finally:
        env.close()


def test_the_graph_with_scene_cameras_picks_with_the_in_process_target(tmp_path, reader):
    """act-sim launch scene:=cameras with the expert (a teacher: it plans from the truth, on scene/truth; its target
    comes from the selector, which reads the scene reader): the episode succeeds, and its target lies where the
    in-process env's scene cameras put it for the same seed."""
    from act_node.tabletop.env import PickObjectEnv

    env = {**os.environ, "ROS_DOMAIN_ID": str(int(os.environ["ROS_DOMAIN_ID"]) + 2)}
    out = tmp_path / "graph"
    run = subprocess.run([sys.executable, "-m", "act_node.cli", "launch", "policy:=expert", "scene:=cameras",
                          "episodes:=1", f"first_seed:={SEED}", f"video_dir:={out}", "record_video:=false",
                          "image_height:=96", "image_width:=128"], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    episode = json.loads((out / f"episode1_seed{SEED}.json").read_text())
    in_process = PickObjectEnv(objects=4, cameras=("front",), scene="cameras", scene_reader=reader)
    try:
        in_process.reset(seed=SEED)
        assert episode["success"], episode
        assert episode["target_error_m"] == pytest.approx(in_process.target.error_m, abs=1e-4)
        assert episode["target_error_m"] < 0.01
    finally:
        in_process.close()


def graph_target(ros, namespace: str, publish_truth: bool) -> tuple[list, list]:
    """The sim, scene reader and selector nodes in process (scene:=cameras's wiring: the sim's objects on
    scene/truth), the sim's truth published or not at all: (the target points the policy would get, the truths
    heard)."""
    from conftest import THREADED_RENDERER, retire, wait_for
    from geometry_msgs.msg import PointStamped
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from visualization_msgs.msg import MarkerArray

    from act_node.nodes.messages import LATCHED, TARGETS
    from act_node.nodes.scene_reader_node import SceneReaderNode
    from act_node.nodes.selector_node import SelectorNode
    from act_node.nodes.sim_node import SimNode

    remap = ["--ros-args", "-r", "scene/objects:=scene/truth"]
    sim = SimNode(namespace=namespace, cli_args=remap, parameter_overrides=[
        Parameter("renderer", value=THREADED_RENDERER), Parameter("objects", value=4),
        Parameter("image_height", value=96), Parameter("image_width", value=128), Parameter("first_seed", value=SEED),
        Parameter("episodes", value=1), Parameter("record_video", value=False),
        Parameter("publish_truth", value=publish_truth)])
    reader, selector = SceneReaderNode(namespace=namespace), SelectorNode(namespace=namespace)
    probe = Node("truth_probe", namespace=namespace)
    points, truths = [], []
    probe.create_subscription(PointStamped, "target/point", points.append, TARGETS)
    probe.create_subscription(MarkerArray, "scene/truth", truths.append, LATCHED)
    for node in (probe, reader, selector, sim):
        ros.add_node(node)
    try:
        assert wait_for(lambda: points, seconds=60.0), "no target/point from the reader and the selector"
        return [(p.point.x, p.point.y, p.header.stamp.sec, p.header.stamp.nanosec) for p in points], truths
    finally:
        retire(ros, sim, reader, selector, probe)


def test_with_scene_cameras_the_policys_target_is_the_same_whether_the_truth_is_published_or_not(ros):
    published, truths = graph_target(ros, "/truth_on", publish_truth=True)
    silent, none = graph_target(ros, "/truth_off", publish_truth=False)
    assert truths and not none  # the truth was there in the first graph, and nowhere in the second
    assert published[:1] == silent[:1]
