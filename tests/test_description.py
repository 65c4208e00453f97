"""The robot description: the arm under a `table` root with the cameras' optical frames, published latched
by the sim on robot_description (as robot_state_publisher does), so RViz shows the arm on the table."""

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from conftest import THREADED_RENDERER, retire, wait_for

from act_node.description import robot_description


def rotation(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF's fixed-axis rpy as a matrix: Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw),
                              math.sin(yaw))
    return (np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]]) @ np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
            @ np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]]))


def test_one_tree_from_the_table_with_every_cameras_optical_frame_where_the_sim_renders_it():
    from act_node.tabletop.cameras import CAMERAS, link_optical, look_at
    from act_node.tabletop.world import ARM_BASE_XY

    robot = ET.fromstring(robot_description())
    links = {link.get("name") for link in robot.iter("link")}
    children = {joint.find("child").get("link"): joint for joint in robot.iter("joint")}
    assert links - set(children) == {"table"}  # every other link hangs from exactly one joint
    assert {f"{name}_optical" for name in CAMERAS} <= links
    base = children["base_link"].find("origin")
    assert [float(v) for v in base.get("xyz").split()] == pytest.approx([*ARM_BASE_XY, 0.0])
    for name, camera in CAMERAS.items():
        joint = children[f"{name}_optical"]
        origin = joint.find("origin")
        built = rotation(*(float(v) for v in origin.get("rpy").split()))
        if "eye" in camera:
            assert joint.find("parent").get("link") == "table"
            assert [float(v) for v in origin.get("xyz").split()] == pytest.approx(camera["eye"], abs=1e-6)
            expected = look_at(np.asarray(camera["eye"], float), np.asarray(camera["target"], float))
        else:
            assert joint.find("parent").get("link") == camera["link"]
            expected = link_optical(np.eye(3))
        assert built == pytest.approx(expected, abs=1e-5), name


def test_the_sim_latches_the_description_for_late_subscribers(ros):
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from act_node.nodes.messages import LATCHED
    from act_node.nodes.sim_node import SimNode

    sim = SimNode(parameter_overrides=[Parameter("renderer", value=THREADED_RENDERER),
                                       Parameter("image_height", value=48), Parameter("image_width", value=64),
                                       Parameter("objects", value=2),
                                       Parameter("autostart", value=False)])
    ros.add_node(sim)
    from rclpy.node import Node

    late = Node("description_reader")  # joins after the sim published it once
    received = []
    late.create_subscription(String, "robot_description", lambda m: received.append(m.data), LATCHED)
    ros.add_node(late)
    assert wait_for(lambda: received), "no robot_description"
    assert received[0] == robot_description() and '<link name="table"/>' in received[0]
    retire(ros, late, sim)


def test_forward_kinematics_of_the_description_is_where_pybullet_puts_the_tool():
    from act_node import so101
    from act_node.description import ArmChain
    from act_node.tabletop.robot import Robot
    from act_node.tabletop.world import World

    world = World()
    robot = Robot(world)
    chain = ArmChain("tcp")
    joints = np.random.default_rng(0).uniform(so101.LOWER_RAD, so101.UPPER_RAD, size=(5, 6))
    for q, fk in zip(joints, chain.positions(joints)):
        robot.load(q)
        assert fk == pytest.approx(np.asarray(robot.link_pose("tcp")[0]), abs=1e-6)
    world.close()


def test_a_chunk_is_drawn_as_its_tool_path_in_the_table_frame(ros):
    from rclpy.node import Node
    from visualization_msgs.msg import MarkerArray

    from act_node import so101
    from act_node.description import ArmChain
    from act_node.nodes.chunk_path import ChunkPath
    from act_node.nodes.messages import RELIABLE, seconds_of

    node = Node("chunk_path_source")
    path = ChunkPath(node)
    paths = []
    node.create_subscription(MarkerArray, "act/chunk_path", paths.append, RELIABLE)
    ros.add_node(node)
    assert wait_for(lambda: path.publisher.get_subscription_count() > 0)
    chunk = np.linspace(so101.LOWER_RAD * 0.3, so101.UPPER_RAD * 0.3, 20)  # (20, 6) rad
    path.publish(chunk, 12.5)
    assert wait_for(lambda: paths)
    (line,) = paths[0].markers
    assert line.header.frame_id == "table" and seconds_of(line.header.stamp) == pytest.approx(12.5)
    drawn = np.array([[p.x, p.y, p.z] for p in line.points])
    assert drawn == pytest.approx(ArmChain("tcp").positions(chunk), abs=1e-9)
    retire(ros, node)
