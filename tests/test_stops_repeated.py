"""A policy node stopped again and again, by SIGINT and SIGTERM at random moments while it infers, stops
cleanly every time: exit 0, well before the runner's stack dump (act_node/nodes/runner.py, STACKS_AFTER_S),
and nothing on stderr about a publish, a log or an inference that failed on the way.

The node runs as its own process (`python -m act_node.nodes.policy_node`), as launch starts it; this process
plays the sim: the episode start, the target and observations, either in lockstep (the next observation as
soon as the chunk for the last is in, the current one said again meanwhile: `infer:=every_n`) or as fast as
a busy realtime camera would (`infer:=latest`), for a checkpoint with cameras and one without. The signal
comes a random moment after the first chunk, when the inference thread is as likely as not inside an answer.

Before the runner shut rclpy down itself, rclpy's signal thread shut the context under the inference
thread: all 12 of these stops failed to publish their chunk ("inference failed: RCLError(... context is
invalid)") and then to log that ("Failed to publish log message to rosout"), and each took 1.2-3.7 s, most
of it Python's teardown of torch and LeRobot after the node was gone.
"""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_IMAGE, retire, wait_for  # noqa: E402
from geometry_msgs.msg import PointStamped  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import Header  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from act_node.nodes import messages  # noqa: E402
from act_node.nodes.messages import LATCHED, RELIABLE, SENSOR  # noqa: E402
from act_node.nodes.runner import STACKS_AFTER_S  # noqa: E402

ROOT = Path(__file__).parents[1]
STOPS_PER_CASE = 3  # 4 cases: 12 stops, about 10 s each here (a node's start is most of it)
FPS = 30.0
START_S = 10.0
LATEST_PERIOD_S = 0.005  # realtime: observations far faster than the tiny policy answers, so it is always busy
UNCLEAN = ("Failed to publish", "inference failed", "RCLError", "Traceback", "Timeout (", "did not end")


class Sim(Node):
    """What the sim node publishes to the policy: an episode, its target and observations."""

    def __init__(self, cameras: list[str], lockstep: bool):
        super().__init__("stop_test_sim")
        self.cameras, self.lockstep = cameras, lockstep
        self.images = {c: self.create_publisher(Image, f"camera/{c}/image_raw", SENSOR) for c in cameras}
        self.joints = self.create_publisher(JointState, "joint_states", SENSOR)
        self.target = self.create_publisher(PointStamped, "target/point", LATCHED)
        self.start = self.create_publisher(Header, "episode/start", LATCHED)
        self.chunks = 0
        self.tick = 0
        self.lock = threading.Lock()
        self.create_subscription(JointTrajectory, "act/action_chunk", self.on_chunk, RELIABLE, raw=True)
        self.start.publish(Header(stamp=messages.to_time(START_S), frame_id=json.dumps({"task": "pick up the cup"})))
        self.target.publish(messages.point_message((0.5, 0.25), START_S))
        # lockstep: the current observation said again while its chunk is out (as the sim's republish_s)
        self.create_timer(0.2 if lockstep else LATEST_PERIOD_S, self.on_timer)

    def observe(self) -> None:
        stamp = START_S + self.tick / FPS
        for camera, publisher in self.images.items():
            publisher.publish(messages.serialized_image(np.full((*TINY_IMAGE, 3), 90, np.uint8), stamp,
                                                        f"{camera}_optical"))
        self.joints.publish(messages.joint_state_message(np.zeros(6), np.zeros(6), stamp))

    def on_chunk(self, _message: bytes) -> None:
        with self.lock:
            self.chunks += 1
            if self.lockstep:  # the next tick at once: the policy thinks again as soon as it has answered
                self.tick += 1
                self.observe()

    def on_timer(self) -> None:
        with self.lock:
            if not self.lockstep:
                self.tick += 1
            self.observe()


def start_policy(checkpoint: Path, infer: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "act_node.nodes.policy_node", "--ros-args", "-r", "__node:=act_policy",
               "-p", f"checkpoint:={checkpoint}", "-p", "replan_every:=1", "-p", f"infer:={infer}",
               "-p", f"fps:={FPS}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def stop_once(ros, checkpoint: Path, infer: str, cameras: list[str], rng: random.Random) -> str | None:
    """Start a policy node, feed it, stop it a random moment after its first chunk; what was unclean, or None."""
    sim = Sim(cameras, lockstep=infer == "every_n")
    ros.add_node(sim)
    node = start_policy(checkpoint, infer)
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(node.stderr), daemon=True)
    reader.start()
    try:
        if not wait_for(lambda: sim.chunks > 0 or node.poll() is not None, seconds=120.0) or node.poll() is not None:
            node.kill()
            node.wait()
            reader.join(timeout=5.0)
            return f"no chunk from the policy node (exit {node.returncode}):\n{''.join(stderr)[-2000:]}"
        number = rng.choice((signal.SIGINT, signal.SIGTERM))
        time.sleep(rng.uniform(0.0, 0.25))  # a random moment of the inference the feeding keeps going
        answered = sim.chunks
        sent = time.monotonic()
        node.send_signal(number)
        try:
            node.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            pass
        took = time.monotonic() - sent
        if node.returncode is None:  # a hang: the runner's dump after STACKS_AFTER_S says where it waits
            node.kill()
            node.wait()
        reader.join(timeout=5.0)
    finally:
        retire(ros, sim)
    text = "".join(stderr)
    what = f"{signal.Signals(number).name} after {answered} chunks: exit {node.returncode} after {took:.1f} s"
    found = [line for line in text.splitlines() if any(mark in line for mark in UNCLEAN)]
    if node.returncode != 0 or took >= STACKS_AFTER_S or found:
        return f"{what}; " + ("\n".join(found) or text[-1500:])
    return None


@pytest.mark.parametrize("infer", ["every_n", "latest"])
@pytest.mark.parametrize("images", [True, False], ids=["camera", "imageless"])
def test_a_policy_node_stops_cleanly_whenever_the_signal_comes(ros, infer, images, request):
    checkpoint = request.getfixturevalue("tiny_checkpoint" if images else "tiny_state_checkpoint")
    cameras = ["front", "wrist"] if images else []
    rng = random.Random(f"{infer}-{images}")  # the same moments in every run
    unclean = [problem for _ in range(STOPS_PER_CASE)
               if (problem := stop_once(ros, checkpoint, infer, cameras, rng)) is not None]
    assert not unclean, f"{len(unclean)} of {STOPS_PER_CASE} stops were not clean:\n" + "\n\n".join(unclean)
