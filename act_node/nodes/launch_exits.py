"""What a node's exit means to a ROS 2 launch file (launch/sim.launch.py, launch/so101.launch.py): `launch`'s
OnProcessExit handlers. Imported by the launch files only (the PyPI wheels have no `launch`; act-sim launch has
its own runner, act_node.nodes.graph.GraphProcesses, which behaves alike).

    the sim exits 0 (its episodes are done)   -> Shutdown: every node gets SIGINT, the launch exits 0
    a node exits 0 before that (stopped)      -> Shutdown, the launch exits 0
    a node refuses to start (code 2)          -> GraphFailed, respawn:=true or not (it would refuse again)
    a node fails (any other code)             -> GraphFailed names it: Shutdown, the launch exits 1
    respawn:=true and a node other than the sim exits or dies -> launch_ros restarts it
"""

from __future__ import annotations

from launch.actions import EmitEvent, LogInfo
from launch.events import Shutdown

from act_node.nodes.graph import RESPAWN_DELAY_S, SIM_LOST
from act_node.stops import REFUSED


class GraphFailed(RuntimeError):
    """A node of the graph ended before the sim's episodes were done. Raised from an exit handler, it makes
    LaunchService log it, shut everything down and return 1."""


def sim_exited(respawn: bool):
    def exited(event, context):
        if context.is_shutdown:
            return None  # stopped from outside (Ctrl-C): the sim said itself what was left undone
        if respawn and event.returncode < 0:  # killed: the others wait for a sim
            return [LogInfo(msg=SIM_LOST.format(how=f"was killed by signal {-event.returncode}"))]
        if event.returncode == 0:  # its episodes are done, or a stop signal came first (it said what was left)
            return [LogInfo(msg="the sim node ended (exit 0): stopping the graph"),
                    EmitEvent(event=Shutdown(reason="the sim node ended"))]
        raise GraphFailed(f"the sim node exited with code {event.returncode} before its episodes were done")
    return exited


def node_exited(name: str, respawn: bool):
    def exited(event, context):
        if context.is_shutdown:
            return None
        if event.returncode == REFUSED:  # started again it would refuse again: respawn:=true or not, the graph ends
            raise GraphFailed(f"node {name} refused to start (exit code {REFUSED}; it says why above)")
        if respawn:  # launch_ros starts it again
            return [LogInfo(msg=f"node {name} ended (code {event.returncode}): respawning it in {RESPAWN_DELAY_S:g} s "
                                "(respawn:=true)")]
        if event.returncode == 0:  # stopped by a signal: a Ctrl-C that reached it before launch handled its own
            return [LogInfo(msg=f"node {name} was stopped (exit 0): stopping the graph"),
                    EmitEvent(event=Shutdown(reason=f"node {name} was stopped"))]
        raise GraphFailed(f"node {name} exited with code {event.returncode} while the graph was running")
    return exited
