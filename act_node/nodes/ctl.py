"""`act-sim ctl VERB`: what docs/arm.md asks of the `ros2` CLI, through rclpy, for an install without one (the PyPI
wheels have no `ros2` command). Each verb is one call against the running graph, in this ROS_DOMAIN_ID:

    verb                            does, as the ros2 CLI would
    stop | estop | reset            ros2 service call /act_so101/<verb> std_srvs/srv/Trigger
    run TASK                        ros2 topic pub --once /act/run std_msgs/String "{data: TASK}" (latched)
    end                             the same with an empty string: the run ends (a recording keeps its episode)
    record-start                    ros2 service call /act_recorder/start ... (an episode with the launch's task:=;
                                    `run TASK` starts one with another text, and the policy's run with it)
    record-stop | record-discard    ros2 service call /act_recorder/stop (keep the episode) or /discard (drop it)
    target X Y [--topic T]          ros2 topic pub --once T geometry_msgs/PointStamped (frame table, metres),
                                    RViz's "Publish Point"
    bag OUT [--duration S]          ros2 bag record of the graph's topics (those act-sim bag2dataset reads), MCAP
                                    or sqlite3, with rosbags' writer; Ctrl-C or --duration ends it

A call that finds nobody (no service, no subscriber within --wait seconds) says so and exits 1; a service's answer
is printed, and exits 0 when it says success.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import signal
import sys
import time
from pathlib import Path

import rclpy
import rclpy.signals
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from act_node.config import DEFAULT_CAMERAS

TRIGGERS = {"stop": ("act_so101", "stop"), "estop": ("act_so101", "estop"), "reset": ("act_so101", "reset"),
            "record-start": ("act_recorder", "start"), "record-stop": ("act_recorder", "stop"),
            "record-discard": ("act_recorder", "discard")}


class Refused(RuntimeError):
    """Nobody answered, or the answer said no: one line for the user."""


def _name(namespace: str, name: str) -> str:
    prefix = namespace.strip().rstrip("/")
    if prefix and not prefix.startswith("/"):
        prefix = f"/{prefix}"
    return f"{prefix}/{name}"


def trigger(node: Node, service: str, wait_s: float) -> str:
    """Call a std_srvs/Trigger service; its message, or Refused naming what failed."""
    from std_srvs.srv import Trigger

    client = node.create_client(Trigger, service)
    if not client.wait_for_service(timeout_sec=wait_s):
        raise Refused(f"no service {service} within {wait_s:g} s: is the graph running (act-sim launch ...) in this "
                      "ROS_DOMAIN_ID and namespace?")
    future = client.call_async(Trigger.Request())
    rclpy.spin_until_future_complete(node, future, timeout_sec=wait_s)
    if not future.done():
        raise Refused(f"{service} did not answer within {wait_s:g} s")
    response = future.result()
    if not response.success:
        raise Refused(f"{service}: {response.message}")
    return response.message


# after the first subscriber matched, how long the count must stay the same before the call ends: each node of a
# graph is discovered on its own (seconds apart on a busy machine), and a latched message reaches a subscriber
# matched later only while its publisher lives (act/run has three: the policy, the selector, the scene reader)
SETTLE_S = 2.0


def publish_once(node: Node, message, topic: str, qos: QoSProfile, wait_s: float, settle_s: float = SETTLE_S) -> int:
    """Publish one message once a subscriber has matched, stay until no new subscriber has matched for settle_s
    (a latched message reaches those too), and wait until every subscriber acknowledged it (reliable QoS); how many
    subscribers there were. Refused when none matched within wait_s."""
    publisher = node.create_publisher(type(message), topic, qos)
    end = time.monotonic() + wait_s
    while publisher.get_subscription_count() == 0 and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    subscribers = publisher.get_subscription_count()
    if subscribers == 0:
        raise Refused(f"nobody subscribes to {publisher.topic_name} within {wait_s:g} s: is the graph running in "
                      "this ROS_DOMAIN_ID and namespace?")
    publisher.publish(message)

    def seen() -> tuple:  # what discovery has shown so far: the matched subscribers and the graph's nodes
        return publisher.get_subscription_count(), tuple(sorted(node.get_node_names()))

    since, last = time.monotonic(), seen()
    while time.monotonic() - since < settle_s and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
        if seen() != last:
            since, last = time.monotonic(), seen()
    subscribers = publisher.get_subscription_count()
    if not publisher.wait_for_all_acked(Duration(seconds=wait_s)):
        raise Refused(f"{publisher.topic_name}: not every subscriber acknowledged the message within {wait_s:g} s")
    return subscribers


# --- bag ------------------------------------------------------------------------------------------------------
class BagRecorder(Node):
    """Subscribes to each wanted topic once a publisher offers it (QoS chosen from what the publishers offer, as
    ros2 bag record does), and writes every message as it arrives, serialized, stamped with its arrival time."""

    def __init__(self, out: Path, topics: list[str], storage: str):
        super().__init__("act_ctl_bag")
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        self.typestore = get_typestore(Stores.ROS2_JAZZY)
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self.writer = Writer(out, version=9, storage_plugin=plugin)
        self.writer.open()
        self.wanted = list(topics)
        self.connections: dict[str, object] = {}
        self.counts: dict[str, int] = {}
        self.create_timer(0.5, self.discover)
        self.discover()

    def discover(self) -> None:
        for topic in self.wanted:
            if topic in self.connections:
                continue
            offers = self.get_publishers_info_by_topic(topic)
            if not offers:
                continue
            type_name = offers[0].topic_type  # e.g. sensor_msgs/msg/Image
            package, _, name = type_name.split("/")
            message_type = getattr(importlib.import_module(f"{package}.msg"), name)
            reliable = all(o.qos_profile.reliability == ReliabilityPolicy.RELIABLE for o in offers)
            latched = all(o.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for o in offers)
            qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE if reliable else
                             ReliabilityPolicy.BEST_EFFORT,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)
            self.connections[topic] = self.writer.add_connection(topic, type_name, typestore=self.typestore)
            self.counts[topic] = 0
            self.create_subscription(message_type, topic, lambda data, t=topic: self.write(t, data), qos, raw=True)
            self.get_logger().info(f"recording {topic} ({type_name})")

    def write(self, topic: str, data: bytes) -> None:
        self.writer.write(self.connections[topic], time.time_ns(), data)
        self.counts[topic] += 1

    def close(self) -> None:
        self.writer.close()


def record_bag(out: Path, topics: list[str], storage: str, duration_s: float | None) -> dict[str, int]:
    """Record until SIGINT, SIGTERM or duration_s; the message count of each topic recorded."""
    if out.exists():
        raise Refused(f"{out} exists already: give a new folder for the bag")
    stop = []
    previous = {number: signal.signal(number, lambda number, _frame: stop.append(number))
                for number in (signal.SIGINT, signal.SIGTERM)}
    node = BagRecorder(out, topics, storage)
    print(f"recording {len(topics)} topics into {out} ({storage}); Ctrl-C ends it", file=sys.stderr, flush=True)
    end = None if duration_s is None else time.monotonic() + duration_s
    try:
        while not stop and (end is None or time.monotonic() < end):
            rclpy.spin_once(node, timeout_sec=0.1)
    finally:
        node.close()
        node.destroy_node()
        for number, handler in previous.items():
            signal.signal(number, handler)
    return dict(node.counts)


# --- the command line -----------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)  # every verb's
    common.add_argument("--namespace", default="", help="the graph's namespace (launch's namespace:=)")
    common.add_argument("--wait", type=float, default=10.0,
                        help="seconds to wait for the service or a subscriber before giving up")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    verb = functools.partial(verbs.add_parser, parents=[common])
    for name, (node, service) in TRIGGERS.items():
        what = {"stop": "freeze the arm at its present pose (torque stays on)",
                "estop": "torque off on every servo that answers, latched until reset",
                "reset": "leave a stop or an e-stop: every goal seeded from a fresh read, then torque",
                "record-start": "the recorder starts an episode with the launch's task:= (run TASK: with another)",
                "record-stop": "the recorder ends the episode and keeps it (it says what it kept)",
                "record-discard": "the recorder drops the episode under way"}[name]
        verb(name, help=f"{what} (/{node}/{service})", description=f"{what}: std_srvs/Trigger "
                               f"on /{node}/{service} (under --namespace)")
    run = verb("run", help="start a run with this task text (act/run)",
                           description="start a run with this task text: the policy runs it from now, a recorder "
                           "starts an episode of it (std_msgs/String on act/run, latched)")
    run.add_argument("task", help="e.g. 'pick up the box'")
    verb("end", help="end the run (an empty act/run); a recording keeps its episode",
                     description="end the run: an empty std_msgs/String on act/run")
    target = verb("target", help="publish a target point in the table frame (RViz's Publish Point)",
                              description="publish a geometry_msgs/PointStamped in frame 'table' (metres), as RViz's "
                              "Publish Point does, on --topic")
    target.add_argument("x", type=float, help="metres along the table's x edge, 0..1")
    target.add_argument("y", type=float, help="metres along the table's y edge, 0..1")
    target.add_argument("--topic", default="target/point", help="where the policy hears it: the launch's "
                        "target_topic:= (e.g. /clicked_point); relative names follow --namespace")
    bag = verb("bag", help="record the graph's topics into a rosbag2 bag (ros2 bag record)",
                           description="record the graph's topics into a rosbag2 bag, until Ctrl-C or --duration: "
                           "act/joint_command, joint_states, camera/<name>/image_raw, target/point, episode/start, "
                           "episode/result (what act-sim bag2dataset reads), and --topic ones")
    bag.add_argument("out", help="the bag's folder (new)")
    bag.add_argument("--cameras", default=",".join(DEFAULT_CAMERAS), help="comma-separated camera names")
    bag.add_argument("--topic", action="append", default=[], help="another topic to record (repeat for more)")
    bag.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    bag.add_argument("--duration", type=float, default=None, help="seconds to record (default: until Ctrl-C)")


def main(argv: list[str] | None = None) -> int:
    """`act-sim ctl VERB ...`: the exit code."""
    parser = argparse.ArgumentParser(prog="act-sim ctl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run_verb(parser.parse_args(argv))


def run_verb(args: argparse.Namespace) -> int:
    """Do the verb; print what came back; the exit code."""
    from std_msgs.msg import String

    from act_node.nodes.messages import LATCHED, TARGETS, point_message, topic_names

    rclpy.init(signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    node = Node("act_ctl", namespace=_name(args.namespace, "").rstrip("/") or "/")
    try:
        if args.verb in TRIGGERS:
            owner, service = TRIGGERS[args.verb]
            print(trigger(node, _name(args.namespace, f"{owner}/{service}"), args.wait))
        elif args.verb in ("run", "end"):
            task = args.task if args.verb == "run" else ""
            count = publish_once(node, String(data=task), "act/run", LATCHED, args.wait)
            print(f"{'run: ' + task if task else 'run ended'} ({count} subscriber{'s' * (count != 1)})")
        elif args.verb == "target":
            count = publish_once(node, point_message((args.x, args.y), time.time()), args.topic, TARGETS, args.wait)
            print(f"target ({args.x:g}, {args.y:g}) in table on {args.topic} ({count} subscriber{'s' * (count != 1)})")
        elif args.verb == "bag":
            cameras = tuple(c.strip() for c in args.cameras.split(",") if c.strip())
            topics = [*topic_names(_name(args.namespace, "").rstrip("/"), cameras).values(),
                      *(t if t.startswith("/") else _name(args.namespace, t) for t in args.topic)]
            counts = record_bag(Path(args.out), topics, args.storage, args.duration)
            print(f"{args.out}: " + (", ".join(f"{t} {n}" for t, n in counts.items()) or "no topic had a publisher"))
        return 0
    except Refused as error:
        print(f"act-sim ctl {args.verb}: {error}", file=sys.stderr)
        return 1
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
