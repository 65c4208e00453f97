"""ros2 launch act_node so101.launch.py port:=/dev/ttyACM0 id:=follower checkpoint:=DIR [camera_devices:=0,2
task:='pick up the cup' dry_run:=true target_topic:=/clicked_point ...]

A real SO-101 follower: the arm node over LeRobot's Feetech bus, a camera node per device and the policy,
from act_node.nodes.graph (robot:=so101), the same description that `act-sim launch robot:=so101` starts
without a ROS 2 install.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from act_node.dds import profile_environment
from act_node.nodes.graph import LAUNCH_ARGUMENTS, RESPAWN_DELAY_S, describe
from act_node.nodes.launch_exits import GraphFailed, node_exited  # noqa: F401 (GraphFailed: tests)
from act_node.stops import launcher_environment
from launch import LaunchDescription

DEFAULTS = {"robot": "so101", "policy": "act"}  # where this file differs from the sim's


def nodes(context):
    """The graph's nodes and, for each, what its exit means (act_node.nodes.launch_exits: a refusal at start or a
    failure ends the launch, non-zero; a node stopped ends it, 0)."""
    values = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    entities = []
    for spec in describe(**values):
        node = Node(package="act_node", executable=spec.executable, name=spec.name, parameters=[spec.parameters],
                    namespace=spec.namespace or None, remappings=spec.remappings, output="screen",
                    # respawn:=true restarts the cameras and the policy, never the arm node (graph.describe)
                    respawn=spec.respawn, respawn_delay=RESPAWN_DELAY_S if spec.respawn else None,
                    # large camera frames arrive whole (act_node.dds); the node stops if this launch dies
                    additional_env={**profile_environment(), **launcher_environment()})
        exited = node_exited(spec.name, spec.respawn)
        entities += [node, RegisterEventHandler(OnProcessExit(target_action=node, on_exit=exited))]
    return entities


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=DEFAULTS.get(name, default), description=text)
                for name, (default, text) in LAUNCH_ARGUMENTS.items()]
    return LaunchDescription([*declared, OpaqueFunction(function=nodes)])
