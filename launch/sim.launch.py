"""ros2 launch act_node sim.launch.py [checkpoint:=DIR policy:=act|expert clock:=lockstep|realtime ...]

The graph (sim, selector, policy or expert) comes from act_node.nodes.graph, the same description that
`act-sim launch` starts without a ROS 2 install.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from act_node.nodes.graph import LAUNCH_ARGUMENTS, describe
from launch import LaunchDescription


def nodes(context):
    values = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    return [Node(package="act_node", executable=spec.executable, name=spec.name, parameters=[spec.parameters],
                 remappings=spec.remappings, output="screen")
            for spec in describe(**values)]


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, (default, text) in LAUNCH_ARGUMENTS.items()]
    return LaunchDescription([*declared, OpaqueFunction(function=nodes)])
