"""What the sim node publishes: each camera's Image and CameraInfo, joint_states, /clock, scene/objects,
episode/start (a Header: stamp = the episode's first tick, frame_id = JSON with episode, seed and task),
episode/result (JSON), act/joint_command (the command applied each tick) and the latched robot_description;
with `target_source:=truth` the true target on target/point. One place that makes the publishers and sends a tick's
observation, so that act_node.nodes.sim_node keeps only its callbacks."""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.duration import Duration
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header, String
from visualization_msgs.msg import MarkerArray

from act_node.description import robot_description
from act_node.nodes.messages import (
    COMMANDS,
    LATCHED,
    RELIABLE,
    SENSOR,
    TARGETS,
    camera_info,
    episode_start_message,
    joint_state_message,
    point_message,
    scene_markers,
    serialized_image,
    to_time,
)
from act_node.stepping import EpisodeStart


class SimTopics:
    def __init__(self, node: Node, cameras: list, truth_target: bool, publish_truth: bool = True):
        self.cameras = cameras  # act_node.tabletop.cameras.CameraSpec: name, size, intrinsics
        self.images = {c.name: node.create_publisher(Image, f"camera/{c.name}/image_raw", SENSOR) for c in cameras}
        self.infos = {c.name: node.create_publisher(CameraInfo, f"camera/{c.name}/camera_info", SENSOR)
                      for c in cameras}
        self.joints = node.create_publisher(JointState, "joint_states", SENSOR)
        self.clock = node.create_publisher(Clock, "/clock", 10)
        # the objects as they stand (publish_truth false: no publisher at all, a check that nothing needs them)
        self.scene = node.create_publisher(MarkerArray, "scene/objects", LATCHED) if publish_truth else None
        self.start = node.create_publisher(Header, "episode/start", LATCHED)
        self.result = node.create_publisher(String, "episode/result", RELIABLE)
        # the command applied each tick, after the executor's limits, stamped with the tick: what a recorder
        # takes as the action, whatever its source (a chunk, a leader arm, a hold)
        self.command = node.create_publisher(JointState, "act/joint_command", COMMANDS)
        # the URDF with the table and camera frames, latched as robot_state_publisher does: RViz's robot model
        self.description = node.create_publisher(String, "robot_description", LATCHED)
        self.description.publish(String(data=robot_description()))
        # no selector in the graph: the sim says where the target is
        self.point = node.create_publisher(PointStamped, "target/point", TARGETS) if truth_target else None

    def recorded_streams(self) -> list:
        """The publishers whose every message a recorder takes: the command, the joint states, the cameras."""
        return [self.command, self.joints, *self.images.values()]

    def watched(self, camera: str) -> bool:
        return self.images[camera].get_subscription_count() > 0

    def episode_started(self, start: EpisodeStart, truth_xy: np.ndarray | None) -> None:
        self.start.publish(episode_start_message(start.stamp_s, start.info()))
        objects = [(o.kind, o.position[0], o.position[1], o.yaw, o.height_m, o.footprint_m) for o in start.objects]
        if self.scene is not None:
            self.scene.publish(scene_markers(objects, start.stamp_s, start.episode))
        if self.point is not None and truth_xy is not None:
            self.point.publish(point_message(truth_xy, start.stamp_s))

    def episode_ended(self, result_json: str, last: bool) -> None:
        self.result.publish(String(data=result_json))
        if last:  # a recorder must have the last result before the graph is stopped (reliable: acknowledged)
            self.result.wait_for_all_acked(Duration(seconds=1.0))

    def commanded(self, command: np.ndarray, stamp_s: float) -> None:
        self.command.publish(joint_state_message(command, np.zeros_like(command), stamp_s))

    def observation(self, stamp: float, images: dict, positions: np.ndarray, velocities: np.ndarray) -> None:
        """The tick's /clock, the images rendered for it (as bytes: rclpy does not convert the pixels,
        bench/bench_transport.py 'profile, raw') with their camera_info, and the joint states."""
        self.clock.publish(Clock(clock=to_time(stamp)))
        for camera in self.cameras:
            if camera.name in images:
                frame = f"{camera.name}_optical"
                self.images[camera.name].publish(serialized_image(images[camera.name], stamp, frame))
                self.infos[camera.name].publish(camera_info(camera.intrinsics(), camera.height, camera.width, stamp,
                                                            frame))
        self.joints.publish(joint_state_message(positions, velocities, stamp))
