"""Selector node: a requested kind + the objects on the table -> the target point, or "not on the table".

Requests come from /target/request (a kind) or from an episode's task (/episode/start). On each new
request or scene it publishes /target/point (PointStamped in `table`, stamped with the scene) when the
kind is there, and always /target/status (found / absent / error, as text) and the attention weights as
RViz markers on /target/attention: a line from the table's near edge to each object, as thick as its
weight, and a sphere at the answer.
"""

from __future__ import annotations

from collections import Counter

from geometry_msgs.msg import Point, PointStamped
from rclpy.node import Node
from std_msgs.msg import ColorRGBA, Header, String
from visualization_msgs.msg import Marker, MarkerArray

from act_node.attention.selector import Selector
from act_node.nodes.diagnostics import Diagnostics, Report
from act_node.nodes.messages import (
    LATCHED,
    RELIABLE,
    TARGETS,
    episode_start,
    header,
    parsed,
    point_message,
    scene_objects,
    sent_at,
)
from act_node.nodes.parameters import declare_node
from act_node.nodes.runner import run
from act_node.observation import requested_kind
from act_node.table_frame import TABLE_FRAME

ANCHOR = Point(x=0.5, y=0.0, z=0.02)  # where the attention lines start: the table's near edge
MAX_LINE_M = 0.02  # line width for a weight of 1




class SelectorNode(Node):
    def __init__(self, **node_options):
        super().__init__("act_selector", **node_options)  # e.g. parameter_overrides, for tests
        values = declare_node(self, "act_selector")
        self.selector = Selector.load(values["model"] or None)
        self.request: str | None = requested_kind(values["task"]) or None
        self.scene: tuple[float, list] | None = None
        self.episode_s = float("-inf")
        self.heard: Counter = Counter()  # requests, episodes, scenes
        self.answers: Counter = Counter()  # found, absent, error
        self.last_status = ""
        self.diagnostics = Diagnostics(self, "target selector", self.fill_diagnostics)
        self.point_pub = self.create_publisher(PointStamped, "target/point", TARGETS)
        self.status_pub = self.create_publisher(String, "target/status", LATCHED)
        self.marker_pub = self.create_publisher(MarkerArray, "target/attention", LATCHED)
        self.create_subscription(String, "target/request", self.on_request, RELIABLE)
        self.create_subscription(Header, "episode/start",
                                 parsed(self, episode_start, "episode start", self.on_episode), LATCHED)
        self.create_subscription(MarkerArray, "scene/objects", parsed(self, scene_objects, "scene", self.on_scene),
                                 LATCHED)
        self.create_subscription(String, "act/run", self.on_run, LATCHED)

    def on_request(self, message: String) -> None:
        self.heard["requests"] += 1
        self.request = message.data.strip()
        self.answer()

    def on_run(self, message: String, info) -> None:  # info: rclpy's MessageInfo (the source timestamp)
        kind = requested_kind(message.data)  # a run's task text names the kind; an empty one ends the run
        if kind:
            self.heard["runs"] += 1
            # the run's scene is one read after it: the last run's would give the policy a target it refuses
            self.request, self.episode_s = kind, sent_at(self, info)
            self.answer()

    def on_episode(self, start: tuple[float, dict]) -> None:
        self.heard["episodes"] += 1
        start_s, info = start
        kind = requested_kind(info.get("task", ""))
        if kind:
            self.request, self.episode_s = kind, start_s
            self.answer()

    def on_scene(self, scene: tuple[float, list]) -> None:
        self.heard["scenes"] += 1
        self.scene = scene
        self.answer()

    def answer(self) -> None:
        if self.request is None or self.scene is None or self.scene[0] < self.episode_s:
            return  # the scene of this episode is not in yet
        stamp, objects = self.scene
        try:
            choice = self.selector.select([(kind, x, y) for kind, x, y, _ in objects], self.request)
        except ValueError as error:
            self.say("error", f"error: {error}")
            self.get_logger().error(f"cannot answer {self.request!r}: {error}")
            return
        self.marker_pub.publish(self.attention_markers(objects, choice, stamp))
        if not choice.found:
            self.say("absent", f"absent: no {self.request} on the table")
            self.get_logger().warn(f"no {self.request} on the table (best score {choice.score:.2f} < "
                                   f"{choice.threshold:.2f})")
            return
        self.point_pub.publish(point_message(choice.target_xy, stamp))
        self.say("found", f"found: {self.request} at ({choice.target_xy[0]:.3f}, {choice.target_xy[1]:.3f}) m")

    def say(self, answer: str, status: str) -> None:
        """The answer on target/status, counted for /diagnostics."""
        self.answers[answer] += 1
        self.last_status = status
        self.status_pub.publish(String(data=status))

    def fill_diagnostics(self, report: Report) -> None:
        if self.last_status.startswith("error"):
            report.error(self.last_status)
        elif self.last_status.startswith("absent"):
            report.warn(self.last_status)
        elif self.request is not None and not self.last_status:
            report.warn(f"no answer yet for {self.request!r}: waiting for this episode's scene")
        report.update({"request": self.request or "none", "heard": self.heard, "answers": self.answers,
                       "last_status": self.last_status or "none"})

    def attention_markers(self, objects, choice, stamp: float) -> MarkerArray:
        markers = [Marker(header=header(stamp, TABLE_FRAME), ns="attention", action=Marker.DELETEALL)]
        for index, ((kind, x, y, _), weight) in enumerate(zip(objects, choice.weights)):
            line = Marker(header=header(stamp, TABLE_FRAME), ns="attention", id=index + 1, type=Marker.LINE_STRIP,
                          action=Marker.ADD, text=kind, points=[ANCHOR, Point(x=x, y=y, z=0.02)])
            line.scale.x = max(MAX_LINE_M * float(weight), 0.001)
            line.color = ColorRGBA(r=0.82, g=0.29, b=0.36, a=0.9)
            line.pose.orientation.w = 1.0
            markers.append(line)
        if choice.found:
            dot = Marker(header=header(stamp, TABLE_FRAME), ns="attention", id=0, type=Marker.SPHERE,
                         action=Marker.ADD, text=f"{self.request} (answer)")
            dot.pose.position = Point(x=choice.target_xy[0], y=choice.target_xy[1], z=0.02)
            dot.pose.orientation.w = 1.0
            dot.scale.x = dot.scale.y = dot.scale.z = 0.02
            dot.color = ColorRGBA(r=0.12, g=0.44, b=0.92, a=1.0)
            markers.append(dot)
        return MarkerArray(markers=markers)

    def destroy_node(self) -> None:
        self.diagnostics.final()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run(SelectorNode, "act_selector_node", args)


if __name__ == "__main__":
    main()
