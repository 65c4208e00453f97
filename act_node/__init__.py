"""act_node: LeRobot's ACT in a closed loop with a PyBullet table-top and an SO-101 arm, over ROS 2."""

__version__ = "0.1.0"
