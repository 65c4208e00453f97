"""The one `main` every node shares: init, build (refusing to start with a clear message), spin until
Ctrl-C, a shutdown from outside or the node's own SystemExit, then clean up."""

from __future__ import annotations

import sys
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node


def run(make_node: Callable[[], Node], label: str, args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    try:
        node = make_node()
    except Exception as error:  # a wrong checkpoint, model or parameter: say what, exit 2
        print(f"{label}: refusing to start: {error}", file=sys.stderr)
        rclpy.try_shutdown()
        sys.exit(2)
    try:
        done = getattr(node, "done", None)  # a node whose work ends (the sim's episodes) completes this future
        if done is not None:
            rclpy.spin_until_future_complete(node, done)
        else:
            rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException, SystemExit):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
