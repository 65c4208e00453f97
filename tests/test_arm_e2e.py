"""End to end through the real driver stack: the expert node's chunks -> arm node -> LeRobot's FeetechMotorsBus
-> pty -> simulated STS3215s -> the table-top's PyBullet arm, on wall time. The scene, the episode and the
target are published as the sim node would; the pick must succeed as the table-top judges it, with every
goal the bus logged inside the bounds."""

from __future__ import annotations

import pytest
from arm_helpers import ROBOT_ID, calibration, check_goal_writes, write_calibration
from conftest import retire, wait_for
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from visualization_msgs.msg import MarkerArray

from act_node.arm.servo_sim import PyBulletArm, SimulatedBus
from act_node.nodes import messages
from act_node.nodes.messages import LATCHED, SENSOR


class Stage(Node):
    """What the sim node and the selector publish about the table: the episode, the scene, the target."""

    def __init__(self):
        super().__init__("stage")
        self.start = self.create_publisher(Header, "/episode/start", LATCHED)
        self.scene = self.create_publisher(MarkerArray, "/scene/objects", LATCHED)
        self.target = self.create_publisher(messages.PointStamped, "/target/point", LATCHED)
        self.joint_stamps: list[float] = []
        self.create_subscription(JointState, "/joint_states",
                                 lambda m: self.joint_stamps.append(messages.seconds_of(m.header.stamp)), SENSOR)


@pytest.fixture
def table():
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=2, cameras=(), image_size=(48, 64), target_source="truth")
    env.reset(seed=3)
    yield env
    env.close()


def test_the_expert_picks_through_lerobots_bus_and_the_simulated_servos(ros, table, tmp_path):
    from act_node.nodes.arm_node import ArmNode
    from act_node.nodes.expert_node import ExpertNode

    env = table
    task = env.table.task
    objects = [(o.kind, o.position[0], o.position[1], o.yaw, o.height_m, o.footprint_m) for o in task.object_states()]
    write_calibration(tmp_path)
    with SimulatedBus(calibration(), physics=PyBulletArm(env.table.robot)) as bus:
        arm = ArmNode(parameter_overrides=[Parameter("port", value=bus.port), Parameter("robot_id", value=ROBOT_ID),
                                           Parameter("calibration_dir", value=str(tmp_path))])
        expert, stage = ExpertNode(), Stage()
        for node in (arm, expert, stage):
            ros.add_node(node)
        try:
            assert wait_for(lambda: stage.count_subscribers("/episode/start") >= 1 and len(stage.joint_stamps) > 5)
            # the expert plans from the joint state of the episode's first tick: start on the bus loop's phase
            start_s = stage.joint_stamps[-1] + 15 / 30
            stage.scene.publish(messages.scene_markers(objects, start_s, 0))
            stage.target.publish(messages.point_message(env.target.xy, start_s))
            stage.start.publish(messages.episode_start_message(start_s, {"episode": 0, "seed": 3, "task": env.task}))

            def success() -> bool:
                with bus.physics_lock:  # pybullet is not thread-safe: the bus steps this world
                    return task.is_success()

            assert wait_for(success, 25.0), (f"no pick: lift {task.lift_m():.3f} m, held {task.held()}, state "
                                             f"{arm.control.chain.state} {arm.control.chain.faults}, "
                                             f"{arm.control.ledger}, plan {expert.plan is not None}")
            assert arm.control.chain.state == "running"
            ledger = arm.control.ledger
            assert ledger.applied >= 3 and ledger.balanced, ledger
        finally:
            retire(ros, stage, expert, arm)
        assert not any(bus.torques().values())
        assert check_goal_writes(bus, arm.control.safety_config) > 6 * 60
