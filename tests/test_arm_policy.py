"""The policy node without the sim, as on an arm: a run starts at start-up (run_on_start + task) or on
/act/run with the task text, an empty /act/run ends it; and the robot:=so101 graph description."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import TINY_IMAGE, retire, wait_for
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from act_node.config import shipped_checkpoint
from act_node.nodes import messages
from act_node.nodes.graph import describe
from act_node.nodes.messages import LATCHED, RELIABLE, SENSOR


class Operator(Node):
    def __init__(self):
        super().__init__("run_operator")
        self.images = {c: self.create_publisher(Image, f"/camera/{c}/image_raw", SENSOR) for c in ("front", "wrist")}
        self.joints = self.create_publisher(JointState, "/joint_states", SENSOR)
        self.target = self.create_publisher(messages.PointStamped, "/target/point", LATCHED)
        self.run = self.create_publisher(String, "/act/run", LATCHED)
        self.chunks: list[JointTrajectory] = []
        self.create_subscription(JointTrajectory, "/act/action_chunk", self.chunks.append, RELIABLE)

    def observe(self) -> float:
        stamp = time.time()
        for camera, publisher in self.images.items():
            publisher.publish(messages.image_message(np.full((*TINY_IMAGE, 3), 90, np.uint8), stamp, camera))
        self.joints.publish(messages.joint_state_message(np.zeros(6), np.zeros(6), stamp))
        return stamp


def test_a_run_starts_at_start_up_and_on_act_run_and_ends_on_an_empty_one(ros, tiny_checkpoint):
    from act_node.nodes.policy_node import PolicyNode

    operator = Operator()
    ros.add_node(operator)
    node = PolicyNode(parameter_overrides=[Parameter("checkpoint", value=str(tiny_checkpoint)),
                                           Parameter("infer", value="latest"), Parameter("run_on_start", value=True),
                                           Parameter("task", value="pick up the cup")])
    ros.add_node(node)
    try:
        assert wait_for(lambda: node.count_publishers("/joint_states") == 1)
        # a target from this run (one clicked before the run started is not used: the node says it waits)
        operator.target.publish(messages.point_message((0.5, 0.25), time.time()))
        assert wait_for(lambda: node.target is not None)
        assert node.task == "pick up the cup" and node.episode_start_s is not None
        assert wait_for(lambda: operator.observe() and operator.chunks, 10.0), "no chunk at start-up"
        operator.run.publish(String(data=""))
        assert wait_for(lambda: node.episode_start_s is None)
        time.sleep(0.3)
        operator.chunks.clear()
        for _ in range(5):
            operator.observe()
            time.sleep(0.05)
        time.sleep(0.3)
        assert operator.chunks == [], "no chunk after the run ended"
        operator.run.publish(String(data="pick up the box"))
        assert wait_for(lambda: node.task == "pick up the box")
        operator.target.publish(messages.point_message((0.4, 0.3), time.time()))
        assert wait_for(lambda: operator.observe() and operator.chunks, 10.0), "no chunk in the new run"
        # end the run before retiring: a node destroyed inside a callback raises in the executor's thread,
        # which ends the spin for every later test of this module
        operator.run.publish(String(data=""))
        assert wait_for(lambda: node.episode_start_s is None)
        time.sleep(0.3)
    finally:
        retire(ros, operator, node)


def test_a_task_of_no_kind_is_refused_at_start_and_on_act_run_and_the_remapped_target_is_named(ros,
                                                                                                tiny_checkpoint):
    """The tiny checkpoint is fed the request: a task asking for no kind refuses the node at start (exit 2 under the
    runner) and is refused on /act/run while the run under way goes on; the target's topic is named as resolved."""
    from act_node.nodes.policy_node import PolicyNode

    def policy(task: str) -> PolicyNode:
        return PolicyNode(parameter_overrides=[Parameter("checkpoint", value=str(tiny_checkpoint)),
                                               Parameter("run_on_start", value=True), Parameter("task", value=task)],
                          cli_args=["--ros-args", "-r", "target/point:=/clicked_point"])

    with pytest.raises(ValueError, match="task:='pick up the banana' asks for 'banana', which is no kind"):
        policy("pick up the banana")
    operator = Operator()
    ros.add_node(operator)
    node = policy("pick up the cup")
    ros.add_node(node)
    try:
        assert node.target_topic == "/clicked_point"
        operator.run.publish(String(data="pick up the banana"))
        time.sleep(1.0)
        assert node.task == "pick up the cup" and node.episode_start_s is not None
        operator.run.publish(String(data="pick up the box"))
        assert wait_for(lambda: node.task == "pick up the box")
        operator.run.publish(String(data=""))
        assert wait_for(lambda: node.episode_start_s is None)
        time.sleep(0.3)
    finally:
        retire(ros, operator, node)


def test_so101_graph_has_the_arm_cameras_and_a_policy_running_from_the_start():
    specs = describe(robot="so101", port="/dev/ttyACM0", id="arm1", camera_devices="0,/dev/video2",
                     task="pick up the cup", policy="expert", rest_pose="0,-1.5,1.5,0.8,0,0", dry_run="true",
                     target_topic="/clicked_point")
    assert [s.name for s in specs] == ["act_so101", "act_camera_front", "act_camera_wrist", "act_expert"]
    arm = specs[0].parameters
    assert arm["port"] == "/dev/ttyACM0" and arm["robot_id"] == "arm1" and arm["dry_run"] is True
    assert arm["rest_pose"] == [0.0, -1.5, 1.5, 0.8, 0.0, 0.0]
    assert specs[2].parameters["device"] == "/dev/video2"
    assert specs[3].remappings == [("target/point", "/clicked_point")]
    with pytest.raises(ValueError, match="needs port"):
        describe(robot="so101")
    with pytest.raises(ValueError, match="camera_devices has 1 entries"):
        describe(robot="so101", port="/dev/x", camera_devices="0")
    with pytest.raises(ValueError, match="robot must be"):
        describe(robot="ur5")
    with pytest.raises(ValueError, match="needs checkpoint:=<a policy trained on your arm>"):
        describe(robot="so101", port="/dev/x")  # policy:=act by default, and the shipped model is the sim's
    policy = describe(robot="so101", port="/dev/x", checkpoint=shipped_checkpoint())[-1]
    assert policy.name == "act_policy" and policy.parameters["infer"] == "every_n"
    # a clicked target and no scene reader: a grasp-planning checkpoint plans from the target and the yaw alone
    assert policy.parameters["use_scene"] is False


def test_on_the_arm_the_grasp_is_planned_among_the_scene_readers_objects_where_one_runs(tmp_path):
    from act_node.perception.scene import CameraCalibration

    calibration_file = tmp_path / "camera.json"
    CameraCalibration.of_sim(96, 128).save(calibration_file)
    nodes = describe(robot="so101", port="/dev/x", checkpoint=shipped_checkpoint(), scene="cameras",
                     camera_calibration=str(calibration_file), camera_devices="0,1")
    policy = nodes[-1]
    assert policy.name == "act_policy" and policy.parameters["use_scene"] is True
    assert any(node.name == "act_scene_reader" for node in nodes)


def test_a_tiny_act_checkpoint_drives_the_arm_through_lerobots_bus(ros, tiny_checkpoint, tmp_path):
    """The policy node (a tiny trained ACT) -> arm node -> LeRobot's bus -> pty -> simulated servos: chunks are
    applied and every goal stays in bounds (the checkpoint is too small to pick; the expert's test does)."""
    from arm_helpers import ROBOT_ID, START_RAD, calibration, check_goal_writes, goal_writes, write_calibration

    from act_node.arm.servo_sim import SimulatedBus
    from act_node.nodes.arm_node import ArmNode
    from act_node.nodes.policy_node import PolicyNode

    write_calibration(tmp_path)
    with SimulatedBus(calibration(), start_rad=START_RAD) as bus:
        arm = ArmNode(parameter_overrides=[Parameter("port", value=bus.port), Parameter("robot_id", value=ROBOT_ID),
                                           Parameter("calibration_dir", value=str(tmp_path))])
        # every_n, as describe_so101 runs it: one answer each replan_every ticks of the arm's joint states
        policy = PolicyNode(parameter_overrides=[Parameter("checkpoint", value=str(tiny_checkpoint)),
                                                 Parameter("infer", value="every_n"),
                                                 Parameter("replan_every", value=10),
                                                 Parameter("skew_s", value=0.03),
                                                 Parameter("run_on_start", value=True),
                                                 Parameter("task", value="pick up the cup")])
        cameras = Operator()  # here only its camera and target publishers
        for node in (arm, policy, cameras):
            ros.add_node(node)
        try:
            assert wait_for(lambda: cameras.count_subscribers("/target/point") >= 1)
            cameras.target.publish(messages.point_message((0.5, 0.25), time.time()))

            def frames_until_applied() -> bool:
                stamp = time.time()
                for camera, publisher in cameras.images.items():
                    publisher.publish(messages.image_message(np.full((*TINY_IMAGE, 3), 90, np.uint8), stamp, camera))
                return arm.control.ledger.applied >= 3

            assert wait_for(frames_until_applied, 30.0), (arm.control.ledger, policy.target,
                                                           {k: len(v) for k, v in policy.matcher.buffers.items()})
            assert wait_for(lambda: len(goal_writes(bus)) > 6 * 10)
            stamps = sorted({messages.seconds_of(chunk.header.stamp) for chunk in cameras.chunks})
            blocks = [round((s - policy.episode_start_s) * policy.fps) // 10 for s in stamps]
            assert len(stamps) >= 3 and len(set(blocks)) == len(blocks), f"not one answer a block of 10: {blocks}"
            cameras.run.publish(String(data=""))  # end the run before retiring (see the test above)
            assert wait_for(lambda: policy.episode_start_s is None)
            time.sleep(0.3)
        finally:
            retire(ros, cameras, policy, arm)
        assert arm.control.ledger.balanced
        assert check_goal_writes(bus, arm.control.safety_config) > 6 * 10
        assert not any(bus.torques().values())
