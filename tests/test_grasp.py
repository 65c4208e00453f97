"""environment_state's target_tool_yaw_grasp layout: the grasp the expert's planner chooses (act_node.grasp),
planned once an episode by the env (and the policy node: tests/test_ros.py) and read off a demonstration's close."""

import math

import numpy as np
import pytest

from act_node import so101
from act_node.grasp import grasp_of_actions, planned_grasp, yaw_of
from act_node.observation import ENV_LAYOUTS, environment_layout, environment_state, environment_state_names
from act_node.table_frame import GRASP_NAMES
from act_node.tabletop.planner import plan_for_scene

FPS = 30.0
START = np.array([0.0, -90.0, 90.0, 60.0, 0.0, 10.0], np.float32)  # LeRobot units: a folded arm, jaws near shut


@pytest.fixture(scope="module")
def reader():
    from act_node.envs import yaw_reader

    return yaw_reader()


def test_the_layout_is_nineteen_numbers_ending_in_the_grasp():
    names = environment_state_names("target_tool_yaw_grasp")
    assert len(names) == 19 and names[:15] == environment_state_names("target_tool_yaw") and names[15:] == GRASP_NAMES
    assert environment_layout(19) == "target_tool_yaw_grasp" and ENV_LAYOUTS[-1] == "target_tool_yaw_grasp"
    grasp = [0.6, 0.8, 0.01, -0.02]
    state = environment_state((0.4, 0.3), "pen", (0.5, 0.1, 0.2), "target_tool_yaw_grasp", [1.0, 0.0], grasp)
    assert state.shape == (19,) and state[15:] == pytest.approx(grasp, abs=1e-6)
    for bad in (None, [1.0, 0.0], [np.nan, 0.0, 0.0, 0.0]):
        with pytest.raises(ValueError, match="needs the planned grasp \\(grasp_cos_roll"):
            environment_state((0.4, 0.3), "pen", (0.5, 0.1, 0.2), "target_tool_yaw_grasp", [1.0, 0.0], bad)


def test_the_planned_grasp_is_the_close_of_the_experts_plan():
    objects = [("pen", 0.55, 0.3, 0.4), ("cube", 0.62, 0.34, 0.0), ("ball", 0.45, 0.2, 0.0)]
    plan = plan_for_scene(START, np.array([0.55, 0.3]), "pen", objects, FPS)
    grasp = planned_grasp(START, (0.55, 0.3), "pen", objects, FPS)
    assert grasp.source == "scene" and grasp.numbers.shape == (4,) and grasp.numbers.dtype == np.float32
    assert grasp.numbers == pytest.approx(grasp_of_actions(plan, (0.55, 0.3)), abs=1e-6)
    assert np.hypot(*grasp.numbers[:2]) == pytest.approx(1.0, abs=1e-6)
    # the close: the wrist roll the plan holds while the jaws shut; the tool beside the target, within centimetres
    gripper = plan[:, 5]
    closing = int(np.flatnonzero(gripper < np.maximum.accumulate(gripper) - 1.0)[0])
    roll = so101.from_lerobot(plan[closing])[4]
    assert grasp.numbers[:2] == pytest.approx([math.cos(roll), math.sin(roll)], abs=1e-3)
    assert np.hypot(*grasp.numbers[2:]) < 0.05


def test_the_neighbours_choose_the_grasp():
    """A cube with a box close beside it, then close before it: the expert takes it across the side with room, a
    wrist roll a quarter turn apart and the tool on another side, which the cube's yaw alone (the same both times,
    by its symmetry) does not say."""
    cube = ("cube", 0.55, 0.3, 0.0)
    grasps = [planned_grasp(START, (0.55, 0.3), "cube", [cube, ("box", 0.55 + dx, 0.3 + dy, 0.0)], FPS).numbers
              for dx, dy in ((0.065, 0.0), (0.0, 0.065))]
    rolls = [math.atan2(g[1], g[0]) for g in grasps]
    turned = abs(math.remainder(rolls[0] - rolls[1], math.pi))
    assert turned == pytest.approx(math.pi / 2, abs=math.radians(10)), np.degrees(rolls)
    assert np.linalg.norm(grasps[0][2:] - grasps[1][2:]) > 0.02


def test_without_a_scene_the_target_alone_lies_as_the_yaw_reader_read_it():
    from act_node.perception.yaw import symmetric_yaw

    read = symmetric_yaw("pen", 0.4)
    assert math.remainder(2 * yaw_of("pen", read) - 0.8, 2 * math.pi) == pytest.approx(0.0, abs=1e-6)
    assert yaw_of("ball", [0.0, 0.0]) == 0.0
    alone = planned_grasp(START, (0.55, 0.3), "pen", None, FPS, read)
    assert alone.source == "target alone"
    assert alone.numbers == pytest.approx(planned_grasp(START, (0.55, 0.3), "pen", [("pen", 0.55, 0.3, 0.4)],
                                                        FPS).numbers, abs=1e-5)
    # a scene that holds no pen (the reader missed it): the pen stands at the target, among the objects read
    missed = planned_grasp(START, (0.55, 0.3), "pen", [("box", 0.55, 0.375, 0.0)], FPS, read)
    beside = planned_grasp(START, (0.55, 0.3), "pen", [("box", 0.55, 0.375, 0.0), ("pen", 0.55, 0.3, 0.4)], FPS)
    assert missed.source == "target alone" and missed.numbers == pytest.approx(beside.numbers, abs=1e-5)


def test_an_unreachable_target_gives_zeros_and_says_why_and_a_bad_target_is_refused():
    far = planned_grasp(START, (0.98, 0.98), "cube", [("cube", 0.98, 0.98, 0.0)], FPS)
    assert far.source == "none" and not np.any(far.numbers) and "no reachable grasp of the cube" in far.why
    with pytest.raises(ValueError, match="the target must be two finite numbers"):
        planned_grasp(START, (np.nan, 0.3), "pen", None, FPS, [1.0, 0.0])
    with pytest.raises(ValueError, match=r"actions must be \(ticks, 6\)"):
        grasp_of_actions(np.zeros((10, 5)), (0.5, 0.3))


@pytest.mark.parametrize("scene", ["sim", "cameras"])
def test_the_env_plans_the_grasp_at_reset_as_the_expert_does_and_holds_it(reader, scene):
    """scene sim: among the simulator's objects, the grasp the scripted expert then executes (its demonstration's
    close gives the same four numbers); scene cameras: among the scene reader's objects."""
    from act_node.envs import make_env
    from act_node.tabletop.expert import ScriptedExpert

    env = make_env(objects=4, cameras=("wrist",), image_size=(24, 32), environment_layout="target_tool_yaw_grasp",
                   yaw_reader=reader, scene=scene)
    try:
        observation, info = env.reset(seed=2105)
        state = observation["environment_state"]
        assert state.shape == (19,) and env.observation_space["environment_state"].contains(state)
        objects = env.object_poses() if scene == "sim" else [(o.kind, o.x, o.y, o.yaw) for o in env.seen]
        expected = planned_grasp(observation["agent_pos"], state[:2], env.scene.request, objects, env.fps, state[13:15])
        assert info["grasp_source"] == expected.source
        assert state[15:] == pytest.approx(expected.numbers, abs=1e-4)
        if scene == "sim":
            expert = ScriptedExpert(env)
            expert.reset(observation)
            assert grasp_of_actions(expert.plan, state[:2]) == pytest.approx(state[15:], abs=1e-4)
        for _ in range(10):
            observation, *_ = env.step(env.action_space.high * 0.5)
        assert observation["environment_state"][15:] == pytest.approx(state[15:], abs=1e-7)
    finally:
        env.close()


def test_an_env_of_the_grasp_layout_without_a_planner_is_refused_naming_where_to_get_one(reader):
    from act_node.tabletop.env import PickObjectEnv

    with pytest.raises(ValueError, match="give grasp_planner= \\(act_node.grasp.planned_grasp"):
        PickObjectEnv(cameras=("wrist",), image_size=(24, 32), environment_layout="target_tool_yaw_grasp",
                      yaw_reader=reader)
