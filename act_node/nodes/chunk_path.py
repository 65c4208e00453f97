"""The chunk's planned path for RViz on act/chunk_path: where the tool goes over a chunk's steps (forward
kinematics of the robot description), a line in the table frame stamped like the chunk."""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import Point
from rclpy.node import Node
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from act_node import so101
from act_node.description import ArmChain
from act_node.nodes.messages import RELIABLE, header
from act_node.table_frame import TABLE_FRAME

LINE_M = 0.004  # line width


class ChunkPath:
    """Publishes each chunk's tool path; a node calls `publish` next to its chunk."""

    def __init__(self, node: Node, names: tuple[str, ...] = so101.JOINT_NAMES):
        self.chain = ArmChain("tcp")
        self.names = tuple(names)
        missing = [j.name for j in self.chain.chain if j.axis is not None and j.name not in self.names]
        if missing:  # another arm's joint names: the chunks still go out, only the path is not drawn
            node.get_logger().warn(f"no chunk path in RViz: the description's joints {missing} are not in "
                                   f"joint_names {list(self.names)}")
            self.chain = None
        self.publisher = node.create_publisher(MarkerArray, "act/chunk_path", RELIABLE)

    def publish(self, chunk_rad: np.ndarray, stamp_s: float) -> None:
        """chunk_rad (chunk_size, joints) in rad, in `names` order; nobody listening: nothing computed."""
        if self.chain is None or self.publisher.get_subscription_count() == 0:
            return
        points = self.chain.positions(chunk_rad, self.names)  # (chunk_size, 3) in the table frame
        line = Marker(header=header(stamp_s, TABLE_FRAME), ns="chunk_path", id=0, type=Marker.LINE_STRIP,
                      action=Marker.ADD, points=[Point(x=float(x), y=float(y), z=float(z)) for x, y, z in points])
        line.pose.orientation.w = 1.0
        line.scale.x = LINE_M
        line.color = ColorRGBA(r=0.16, g=0.72, b=0.42, a=0.9)
        self.publisher.publish(MarkerArray(markers=[line]))
