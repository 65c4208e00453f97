"""Does the recorder node keep up? Two cameras at 480x640 and 30 fps with the joint states and the applied command,
published for `--seconds` by this process; the recorder node (`act_recorder_node`, its own process, the package's
Fast DDS profile) records them as one episode started and stopped on act/run.

    python bench/bench_recorder.py [--seconds 20] [--height 480 --width 640]

Prints frames written / frames published, the given-up and late counts the recorder logged, and the recorder's
CPU share (its process's user + system time over the wall time, as a share of one core) in one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--fps", type=float, default=30.0)
    args = parser.parse_args()

    import rclpy
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import String

    from act_node.dds import profile_environment
    from act_node.nodes import messages

    os.environ.update(profile_environment())  # this publisher too: whole frames between the processes
    root = Path(tempfile.mkdtemp()) / "data"
    recorder = subprocess.Popen([sys.executable, "-m", "act_node.nodes.recorder_node", "--ros-args", "-p",
                                 f"root:={root}", "-p", "use_target:=false", "-p", f"fps:={args.fps}",
                                 "-p", "robot_type:=so101_follower"], env={**os.environ},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rclpy.init()
    node = rclpy.create_node("bench_recorder_source")
    commands = node.create_publisher(JointState, "act/joint_command", messages.COMMANDS)
    joints = node.create_publisher(JointState, "joint_states", messages.SENSOR)
    cameras = {c: node.create_publisher(Image, f"camera/{c}/image_raw", messages.SENSOR) for c in ("front", "wrist")}
    run = node.create_publisher(String, "act/run", messages.LATCHED)
    deadline = time.monotonic() + 120
    while commands.get_subscription_count() == 0 and time.monotonic() < deadline:  # the recorder loads LeRobot
        time.sleep(0.2)
    time.sleep(1.0)
    images = {c: np.random.default_rng(i).integers(0, 255, (args.height, args.width, 3), np.uint8)
              for i, c in enumerate(cameras)}
    run.publish(String(data="pick up the cup"))
    time.sleep(0.5)
    started_cpu, started = cpu_seconds(recorder.pid), time.monotonic()
    published, period = 0, 1.0 / args.fps
    while time.monotonic() - started < args.seconds:
        stamp = time.time()
        q = np.full(6, 0.1 * np.sin(published / 30))
        for camera, publisher in cameras.items():
            publisher.publish(messages.serialized_image(images[camera], stamp, f"{camera}_optical"))
        joints.publish(messages.joint_state_message(q, np.zeros(6), stamp))
        commands.publish(messages.joint_state_message(q, np.zeros(6), stamp))
        published += 1
        time.sleep(max(0.0, started + published * period - time.monotonic()))
    wall = time.monotonic() - started
    run.publish(String(data=""))  # the episode ends: kept
    time.sleep(3.0)
    cpu = cpu_seconds(recorder.pid) - started_cpu
    recorder.send_signal(2)
    log = recorder.communicate(timeout=120)[0]
    node.destroy_node()
    rclpy.shutdown()
    saved = [line for line in log.splitlines() if "episode saved" in line or "dropped" in line]
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    written = LeRobotDataset("local/act_node_demonstrations", root=root).meta.total_frames if saved else 0
    print(f"{args.height}x{args.width}, 2 cameras, {args.fps:g} fps, {wall:.1f} s: published {published} frames, "
          f"written {written} ({written / max(published, 1):.3f}); recorder CPU {cpu / wall:.2f} of a core "
          f"while recording")
    print("\n".join(saved) or log[-2000:])


if __name__ == "__main__":
    main()
