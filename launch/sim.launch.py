"""ros2 launch act_node sim.launch.py [policy:=act|expert checkpoint:=DIR clock:=lockstep|realtime rviz:=true ...]

policy:=act (the default) runs the shipped ACT, models/act_target_tool_yaw_grasp, unless checkpoint:= names another.

The graph (sim, selector, policy or expert) comes from act_node.nodes.graph, the same description that
`act-sim launch` starts without a ROS 2 install, and it ends the same way:

    the sim exits 0 (its episodes are done)  -> Shutdown: every node gets SIGINT, the launch exits 0
    a node exits 0 before that (stopped)     -> Shutdown, the launch exits 0
    a node fails (any other code)            -> GraphFailed names it: Shutdown, the launch exits 1
    a node refuses to start (code 2)         -> the same, respawn:=true or not (it would refuse again)
    Ctrl-C                                   -> launch's own Shutdown; exits during it are not failures
    respawn:=true and a node other than the sim exits or dies -> launch_ros restarts it after
                                                RESPAWN_DELAY_S; the sim holds meanwhile
    respawn:=true and the sim killed by a signal -> not restarted; the others keep running and wait
                                                for a sim until a stop (graph.SIM_LOST says so)

Every node exits 0 when a signal stopped it and only then (act_node/nodes/runner.py: a bug is 1, a refusal
2, a kill -N). A terminal's Ctrl-C reaches launch and the nodes at once, and a node quick to stop (the
selector) can exit before launch has handled its own SIGINT: its exit 0 is then the user's stop arriving
first, not a failure, and it ends the graph the same way.

Where ROS 2 has them (an apt install, not the PyPI wheels) it also starts robot_state_publisher on the
arm's URDF (share/act_node/sim/so101.urdf, under a `table` root with the cameras' optical frames:
act_node/description.py), which turns joint_states into TF, and with rviz:=true RViz with
share/act_node/launch/rviz/act_node.rviz.
"""

from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from act_node.dds import profile_environment
from act_node.description import robot_description
from act_node.nodes.graph import LAUNCH_ARGUMENTS, RESPAWN_DELAY_S, describe, namespace_of
from act_node.nodes.launch_exits import GraphFailed, node_exited, sim_exited  # noqa: F401 (GraphFailed: tests)
from act_node.paths import share_dir
from act_node.settings import launch_arguments
from act_node.stops import launcher_environment
from launch import LaunchDescription

VIEWER_ARGUMENTS = launch_arguments(("viewer",))  # act_node.settings: rviz


def graph(context):
    """The graph's nodes and, for each, what its exit means."""
    values = {name: LaunchConfiguration(name).perform(context) for name in LAUNCH_ARGUMENTS}
    entities, specs = [], describe(**values)
    respawn = any(spec.respawn for spec in specs)
    for index, spec in enumerate(specs):  # the sim first
        node = Node(package="act_node", executable=spec.executable, name=spec.name, parameters=[spec.parameters],
                    namespace=spec.namespace or None, remappings=spec.remappings, output="screen",
                    respawn=spec.respawn, respawn_delay=RESPAWN_DELAY_S if spec.respawn else None,
                    # large camera frames arrive whole (act_node.dds); the node stops if this launch dies
                    additional_env={**profile_environment(), **launcher_environment()})
        exited = sim_exited(respawn) if index == 0 else node_exited(spec.name, spec.respawn)
        entities += [node, RegisterEventHandler(OnProcessExit(target_action=node, on_exit=exited))]
    return entities


def viewers(context):
    """robot_state_publisher, and RViz with rviz:=true, where this ROS 2 install has them."""
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    def installed(package: str) -> bool:
        try:
            get_package_share_directory(package, print_warning=False)
            return True
        except PackageNotFoundError:
            return False

    share = share_dir()
    namespace = namespace_of(LaunchConfiguration("namespace").perform(context))
    # TF is absolute by convention; in a namespace it follows the graph, so two graphs' arms do not mix
    placement = {"namespace": namespace or None,
                 "remappings": [("/tf", "tf"), ("/tf_static", "tf_static"), ("/clock", "clock")] if namespace else []}
    entities = []
    if installed("robot_state_publisher"):
        urdf = robot_description()  # the sim publishes the same on robot_description
        entities.append(Node(package="robot_state_publisher", executable="robot_state_publisher",
                             name="robot_state_publisher", output="screen", **placement,
                             parameters=[{"robot_description": urdf, "use_sim_time": True}]))
    else:
        entities.append(LogInfo(msg="robot_state_publisher is not installed: no TF for the arm "
                                    "(apt install ros-jazzy-robot-state-publisher)"))
    if LaunchConfiguration("rviz").perform(context).lower() == "true":
        if installed("rviz2"):
            config = share / "launch" / "rviz" / "act_node.rviz"
            entities.append(Node(package="rviz2", executable="rviz2", name="rviz", output="screen", **placement,
                                 arguments=["-d", str(config)], parameters=[{"use_sim_time": True}]))
        else:
            entities.append(LogInfo(msg="rviz:=true but rviz2 is not installed (apt install ros-jazzy-rviz2)"))
    return entities


def generate_launch_description():
    declared = [DeclareLaunchArgument(name, default_value=default, description=text)
                for name, (default, text) in {**LAUNCH_ARGUMENTS, **VIEWER_ARGUMENTS}.items()]
    return LaunchDescription([*declared, OpaqueFunction(function=graph), OpaqueFunction(function=viewers)])
