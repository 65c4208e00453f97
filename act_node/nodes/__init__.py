"""rclpy nodes, thin: messages in, act_node's pieces, messages out. The only package that imports rclpy.

A node process imports this package before its own module, whose imports (torch, LeRobot, pybullet) take
seconds. A stop that comes meanwhile (a graph stopped because another node refused to start, a Ctrl-C at
launch) used to raise KeyboardInterrupt inside those imports: a traceback in the launch log for a stop that
was asked for. So a node's process takes SIGINT and SIGTERM here, before anything heavy, as a request to stop
that ends it at once with 0, what runner.py's own handler (installed once the node is built) makes of a stop.
Only in a node's process: `python -m act_node.nodes.<node>` (sys.argv[0] is "-m" while its module is found)
or its console script (`act_<name>_node`); never in a process that merely imports a node (tests, act-sim).
"""

import os
import signal
import sys

from act_node.stops import STOP_SIGNALS


def _stopped_while_starting(_number, _frame) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


def _is_a_node_process() -> bool:
    first = sys.argv[0] if sys.argv else ""
    name = os.path.basename(first)
    return first == "-m" or (name.startswith("act_") and name.endswith("_node"))


if _is_a_node_process():  # whatever it inherited (a shell's background job ignores SIGINT): runner.py does the same
    for _number in STOP_SIGNALS:
        signal.signal(_number, _stopped_while_starting)
