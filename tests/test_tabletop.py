"""The PyBullet table-top: the arm's facts, IK, scenes, cameras, the gymnasium env and the expert."""

import math

import numpy as np
import pybullet
import pytest
from gymnasium.utils.env_checker import check_env

from act_node import so101
from act_node.tabletop import ENV_ID, kinematics
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert
from act_node.tabletop.objects import KINDS
from act_node.tabletop.scene import GAP_M, REACH_M, in_reach, sample_scene
from act_node.tabletop.world import ARM_BASE_XY, table_to_arm

SMALL = dict(image_size=(48, 64))


@pytest.fixture(scope="module")
def env():
    environment = PickObjectEnv(objects=4, target_source="truth", **SMALL)
    environment.reset(seed=0)
    yield environment
    environment.close()


def test_pybullet_is_built_with_numpy():
    assert pybullet.isNumpyEnabled() == 1


def test_units_convert_both_ways_and_gripper_spans_its_range():
    values = np.array([10.0, -45.0, 30.0, 90.0, -120.0, 37.5])
    assert np.allclose(so101.to_lerobot(so101.from_lerobot(values)), values)
    assert so101.from_lerobot(np.array([0, 0, 0, 0, 0, 0.0]))[5] == pytest.approx(so101.LOWER_RAD[5])
    assert so101.from_lerobot(np.array([0, 0, 0, 0, 0, 100.0]))[5] == pytest.approx(so101.UPPER_RAD[5])
    with pytest.raises(ValueError, match="expected 6 joint values"):
        so101.to_lerobot(np.zeros(5))


def test_urdf_joints_match_the_so101_facts(env):
    robot = env.table.robot
    client = robot.world.client
    assert [client.getJointInfo(robot.body, i)[1].decode() for i in robot.joints] == list(so101.JOINT_NAMES)
    for index, low, high in zip(robot.joints, so101.LOWER_RAD, so101.UPPER_RAD):
        limits = (low, high, so101.MAX_TORQUE_NM, so101.MAX_VELOCITY_RAD_S)
        assert robot.world.joint_limits(robot.body, index) == pytest.approx(limits, abs=1e-4)


@pytest.mark.parametrize("xy, z, yaw, tilt", [((0.5, 0.25), 0.03, 0.3, 0.0), ((0.38, 0.16), 0.02, -1.0, 0.0),
                                              ((0.64, 0.22), 0.06, 2.0, 0.0), ((0.55, 0.3), 0.1, 0.7, 0.35)])
def test_ik_puts_the_tcp_where_asked_pointing_down(env, xy, z, yaw, tilt):
    joints = kinematics.top_down_ik(np.array([*table_to_arm(np.array(xy)), z]), yaw, tilt)
    robot = env.table.robot
    for index, angle in zip(robot.joints, list(joints) + [0.0]):
        robot.world.reset_joint(robot.body, index, angle)
    position, rotation = robot.link_pose("tcp")
    assert np.allclose(position, [*xy, z], atol=1e-4)
    tool_axis = rotation[:, 0]
    assert math.degrees(math.acos(-tool_axis[2])) == pytest.approx(math.degrees(tilt), abs=0.1)
    side = kinematics.closing_axis_yaw(joints) + math.pi / 2  # arm frame -> table frame
    assert abs(np.dot(rotation[:2, 1] / np.linalg.norm(rotation[:2, 1]), [math.cos(side), math.sin(side)])) > 0.999


def test_ik_refuses_what_the_arm_cannot_reach():
    with pytest.raises(kinematics.Unreachable, match="reach is"):
        kinematics.top_down_ik(np.array([0.6, 0.0, 0.02]), 0.0)


def test_scenes_are_seeded_in_reach_and_apart():
    for seed in range(40):
        scene = sample_scene(np.random.default_rng(seed), 8)
        assert sorted(o.kind.name for o in scene.objects) == sorted(KINDS)
        for i, a in enumerate(scene.objects):
            assert in_reach(a.xy)
            assert REACH_M[0] <= np.hypot(*(a.xy - ARM_BASE_XY)) <= REACH_M[1]
            for b in scene.objects[i + 1:]:
                assert np.hypot(*(a.xy - b.xy)) >= a.kind.footprint_m + b.kind.footprint_m + GAP_M - 1e-9
    first = sample_scene(np.random.default_rng(5), 4)
    again = sample_scene(np.random.default_rng(5), 4)
    assert [(o.kind.name, *o.xy, o.yaw) for o in first.objects] == [(o.kind.name, *o.xy, o.yaw) for o in again.objects]
    with pytest.raises(ValueError, match="unknown object kind 'plate'"):
        sample_scene(np.random.default_rng(0), 3, request="plate")
    with pytest.raises(ValueError, match="object count must be 1..8"):
        sample_scene(np.random.default_rng(0), 9)


def test_env_passes_the_gymnasium_checker():
    import gymnasium as gym

    environment = gym.make(ENV_ID, objects=3, target_source="truth", **SMALL).unwrapped
    check_env(environment, skip_render_check=False)
    environment.close()


def test_env_is_registered_and_observes_in_lerobot_units():
    import gymnasium as gym

    environment = gym.make(ENV_ID, objects=2, target_source="truth", **SMALL)
    observation, info = environment.reset(seed=1)
    assert set(observation["pixels"]) == {"front", "wrist"}
    assert observation["pixels"]["front"].shape == (48, 64, 3) and observation["pixels"]["front"].dtype == np.uint8
    assert observation["agent_pos"].dtype == np.float32 and observation["agent_pos"].shape == (6,)
    assert 0 <= observation["agent_pos"][5] <= 100  # the gripper in 0-100
    assert info["task"].startswith("pick up the ")
    scene = environment.unwrapped.scene
    assert np.allclose(observation["environment_state"][:2], scene.target.xy)
    request = np.zeros(8, dtype=np.float32)
    request[list(KINDS).index(scene.request)] = 1.0
    assert np.array_equal(observation["environment_state"][2:], request)  # the request, one-hot
    environment.close()


def test_same_seed_gives_the_same_scene_images_and_states():
    runs = []
    for _ in range(2):
        environment = PickObjectEnv(objects=4, target_source="truth", **SMALL)
        observation, _ = environment.reset(seed=7)
        expert = ScriptedExpert(environment)
        expert.reset(observation)
        trace = [observation]
        for _ in range(25):
            observation, *_ = environment.step(expert.act(observation))
            trace.append(observation)
        runs.append(trace)
        environment.close()
    for a, b in zip(*runs):
        assert np.array_equal(a["agent_pos"], b["agent_pos"])
        for camera in a["pixels"]:
            assert np.array_equal(a["pixels"][camera], b["pixels"][camera])
    assert not np.array_equal(runs[0][0]["pixels"]["wrist"], runs[0][-1]["pixels"]["wrist"]), "the arm moved"


def egl_or_skip(**settings) -> PickObjectEnv:
    try:
        return PickObjectEnv(renderer="egl", **settings)
    except RuntimeError as error:  # no libEGL on this machine: the message says what to install
        assert "renderer 'egl'" in str(error)
        pytest.skip(str(error))


def test_the_egl_renderer_draws_the_same_scene_lit_its_own_way_and_changes_no_physics(capfd):
    settings = dict(objects=4, target_source="truth", image_size=(96, 128))
    runs = {}
    for renderer in ("tiny", "egl"):
        environment = egl_or_skip(**settings) if renderer == "egl" else PickObjectEnv(**settings)
        observation, _ = environment.reset(seed=7)
        expert = ScriptedExpert(environment)
        expert.reset(observation)
        for _ in range(10):
            observation, *_ = environment.step(expert.act(observation))
        runs[renderer] = observation
        environment.close()
    assert "GL_VERSION" not in capfd.readouterr().out, "the plugin's report reached stdout"
    tiny, egl = runs["tiny"], runs["egl"]
    assert np.array_equal(tiny["agent_pos"], egl["agent_pos"])  # rendering never touches the physics
    for camera in tiny["pixels"]:
        a, b = tiny["pixels"][camera].astype(np.float64), egl["pixels"][camera].astype(np.float64)
        assert a.shape == b.shape and not np.array_equal(a, b), f"{camera}: the same picture: not EGL's"
        # with each channel's mean brightness matched, the shapes agree (measured: about 6 of 255)
        centred = np.abs((a - a.mean(axis=(0, 1))) - (b - b.mean(axis=(0, 1)))).mean()
        assert centred < 15, f"{camera}: {centred:.1f} of 255 apart: not the same scene"


def test_an_unknown_renderer_is_refused_by_name():
    with pytest.raises(ValueError, match="renderer must be one of \\['auto', 'tiny', 'egl'\\], got 'opengl'"):
        PickObjectEnv(objects=1, renderer="opengl")


def test_auto_draws_small_frames_with_tinyrenderer_large_ones_with_egl_where_it_loads_and_says_why_not(
        monkeypatch, capfd):
    from act_node.tabletop import world
    from act_node.tabletop.cameras import EGL_FROM_PIXELS

    large = (180, 240)  # 43,200 pixels: EGL's side of the crossover
    assert large[0] * large[1] >= EGL_FROM_PIXELS > 96 * 128
    small = PickObjectEnv(objects=1, renderer="auto", image_size=(96, 128))  # the training size: TinyRenderer's side
    assert small.renderer == "tiny"
    small.close()
    environment = PickObjectEnv(objects=1, renderer="auto", image_size=large)
    works = environment.renderer == "egl"
    environment.close()
    try:
        egl_or_skip(objects=1, image_size=large).close()
        assert works, "EGL loads here, and auto did not take it"
    except pytest.skip.Exception:
        assert not works
    capfd.readouterr()
    monkeypatch.setattr(world, "egl_plugin_path", lambda: None)  # a pybullet built without the plugin
    monkeypatch.setattr(world, "_fallback_noted", [])
    for _ in range(2):
        environment = PickObjectEnv(objects=1, renderer="auto", image_size=large)
        assert environment.renderer == "tiny"
        assert environment.table.world.client.renderer == world.pybullet.ER_TINY_RENDERER
        environment.close()
    said = capfd.readouterr().err
    assert said.count("renderer 'auto': pybullet could not load its eglRenderer plugin") == 1  # once a process
    assert "drawing the cameras with TinyRenderer" in said
    with pytest.raises(RuntimeError, match="renderer 'egl': pybullet could not load its eglRenderer plugin"):
        PickObjectEnv(objects=1, renderer="egl")


def test_bad_actions_raise_and_out_of_range_targets_are_clamped(env):
    observation, _ = env.reset(seed=2)
    with pytest.raises(ValueError, match=r"shape \(6,\)"):
        env.step(np.zeros(5))
    nan = observation["agent_pos"].copy()
    nan[2] = np.nan
    with pytest.raises(ValueError, match="NaN or inf at joints \\['elbow_flex'\\]"):
        env.step(nan)
    wild = np.clip(observation["agent_pos"], so101.LOWER_LEROBOT + 1, so101.UPPER_LEROBOT - 1)
    wild[0], wild[5] = 500.0, -20.0
    _, _, _, _, info = env.step(wild)
    assert info["clamped_joints"] == 2 and info["clamped_total"] == 2
    _, _, _, _, info = env.step(wild)
    assert info["clamped_joints"] == 2 and info["clamped_total"] == 4


def test_camera_intrinsics_and_pose_project_onto_the_rendered_object():
    environment = PickObjectEnv(objects=1, cameras=("top", "front"), image_size=(120, 160), target_source="truth",
                                request="cube")
    observation, _ = environment.reset(seed=3)
    cube = environment.scene.target
    for camera in environment.cameras:
        position, optical = environment.table.rig.pose(camera.name)
        point = optical.T @ (np.array([*cube.xy, 0.035]) - position)  # the cube's top centre, camera frame
        u, v, w = camera.intrinsics() @ point
        column, row = int(u / w), int(v / w)
        pixel = observation["pixels"][camera.name][row, column].astype(int)
        assert pixel[0] > 120 and pixel[1] < 80 and pixel[2] < 80, f"{camera.name}: {pixel} at {(row, column)} not red"
    environment.close()


def test_selector_target_agrees_with_the_truth():
    environment = PickObjectEnv(objects=6, **SMALL)
    errors = []
    for seed in range(10):
        observation, info = environment.reset(seed=seed)
        assert info["selector_found"]
        errors.append(info["target_error_m"])
        assert np.hypot(*(observation["environment_state"][:2] - environment.scene.target.xy)) == \
            pytest.approx(info["target_error_m"], abs=1e-6)
    environment.close()
    assert max(errors) < 0.01


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_the_expert_picks_up_the_requested_object(env, seed):
    observation, info = env.reset(seed=seed)
    expert = ScriptedExpert(env)
    expert.reset(observation)
    start = env.scene.target.xy.copy()
    terminated = truncated = False
    while not (terminated or truncated):
        observation, reward, terminated, truncated, info = env.step(expert.act(observation))
    assert info["is_success"] and reward == 1.0, env.task
    task = env.table.task
    assert task.lift_m() >= 0.05 and task.held()
    assert np.hypot(*(task.target_pose()[0][:2] - start)) < 0.05


def test_the_gripper_holds_what_it_lifted_for_a_second_more():
    """The gripper squeezes with its holding torque (so101.GRIPPER_TORQUE_NM): at full torque these four picks
    (two balls, two cups) reached the success and the object was pressed out of the jaws within the second."""
    env = PickObjectEnv(objects=4, **SMALL)
    expert = ScriptedExpert(env)
    for seed in (10004, 10012, 10015, 10017):
        observation, info = env.reset(seed=seed)
        expert.reset(observation)
        terminated = truncated = False
        while not (terminated or truncated):
            observation, _, terminated, truncated, info = env.step(expert.act(observation))
        assert info["is_success"], (seed, env.task)
        for _ in range(30):  # the rest of the lift, then the hold
            observation, *_ = env.step(expert.act(observation))
        task = env.table.task
        assert task.held() and task.lift_m() >= 0.05, (seed, env.task, task.lift_m())
    env.close()


def test_egl_refuses_to_draw_on_another_thread_than_the_one_that_made_it():
    import threading

    environment = egl_or_skip(objects=1, image_size=(24, 32))
    caught: list[BaseException] = []

    def reset_elsewhere() -> None:
        try:
            environment.reset(seed=1)
        except RuntimeError as error:
            caught.append(error)

    worker = threading.Thread(target=reset_elsewhere)
    worker.start()
    worker.join()
    assert caught and "renderer 'egl' draws only on the thread that made the world" in str(caught[0])
    observation, _ = environment.reset(seed=1)  # on its own thread it draws
    assert observation["pixels"]["front"].std() > 0
    environment.close()
