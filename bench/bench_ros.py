"""ROS 2 graph speed, measured side by side in one run (rclpy over Fast DDS on loopback).

  request-to-chunk     observation published -> chunk received from the policy node, against
                       act_node.policy called directly on the same observation (ratio, goal 1.03); and its
                       floor: a std_msgs/Header out and back between two rclpy processes, nothing computed
  sim realtime factor  sim seconds per wall second of the sim node in realtime mode, a policy node attached:
                       the shipped ACT (its yaw reader reads the two cameras at 96x128, the size it needs), and
                       an untrained camera ACT at 240x320; with --checkpoint DIR, that checkpoint too, at the
                       image size it was trained on (a camera ACT's: bench_camera_act.py times its chunk alone)
  graph images         the graph's two 480x640 EGL cameras, every tick, to an outside viewer: frames missing
(Images between processes at 480x640 and 720x1280, with and without the profile: bench_transport.py.)

Untrained weights, LeRobot's documented-size ACT for this task (bench_policy.DOCUMENTED).
Run: .venv/bin/python bench/bench_ros.py [--repeat 20]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import rclpy  # noqa: E402
from bench_policy import DOCUMENTED, make_checkpoint  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import Float64, Header  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from act_node import so101  # noqa: E402
from act_node.config import TRAIN_IMAGE_SIZE  # noqa: E402
from act_node.nodes import messages  # noqa: E402
from act_node.nodes.messages import LATCHED, RELIABLE, SENSOR  # noqa: E402
from act_node.policy import ChunkPolicy  # noqa: E402
from act_node.record import record  # noqa: E402
from act_node.tabletop.env import PickObjectEnv  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def request_to_chunk(executor, checkpoint: Path, env: PickObjectEnv, repeat: int) -> dict:
    """The policy node in its own process, as in the graph (`python -m act_node.nodes.policy_node`, the
    package's Fast DDS profile): this process publishes an observation (two camera images and the joints,
    built from numpy) and takes the time until the chunk is back here as numpy (`chunk_actions`), against
    ChunkPolicy called directly on the same observation in this process, interleaved, the same torch threads."""
    import subprocess

    import torch

    from act_node.dds import profile_environment

    node = subprocess.Popen([sys.executable, "-m", "act_node.nodes.policy_node", "--ros-args",
                             "-p", f"checkpoint:={checkpoint}", "-p", "replan_every:=1",
                             "-p", f"threads:={torch.get_num_threads()}"],
                            env={**os.environ, **profile_environment()}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    probe = Node("bench_probe")
    arrived: dict[float, float] = {}
    news = threading.Event()

    def on_chunk(message) -> None:
        stamp, _ = messages.chunk_actions(message, 30.0)  # what a consumer does before it can use the chunk
        arrived.setdefault(round(stamp, 6), time.perf_counter())
        news.set()

    probe.create_subscription(JointTrajectory, "/act/action_chunk", on_chunk, RELIABLE, raw=True)  # as the sim
    inside: list[float] = []  # the node's own time from the call to the chunk published (act/inference_latency)
    probe.create_subscription(Float64, "/act/inference_latency", lambda m: inside.append(m.data), RELIABLE)
    images = {c: probe.create_publisher(Image, f"/camera/{c}/image_raw", SENSOR)
              for c in ("front", "wrist")}
    joints = probe.create_publisher(JointState, "/joint_states", SENSOR)
    start = probe.create_publisher(Header, "/episode/start", LATCHED)
    target = probe.create_publisher(messages.PointStamped, "/target/point", LATCHED)
    executor.add_node(probe)
    began = time.perf_counter()
    while joints.get_subscription_count() == 0 or probe.count_publishers("/act/action_chunk") == 0:
        if node.poll() is not None or time.perf_counter() - began > 120:
            node.kill()
            raise SystemExit(f"the policy node did not come up: {node.stderr.read()[-2000:]}")
        time.sleep(0.1)
    time.sleep(1.0)
    start.publish(Header(stamp=messages.to_time(0.0), frame_id=json.dumps({"task": env.task})))
    observation, _ = env.reset(seed=3)
    target.publish(messages.point_message(tuple(observation["environment_state"][:2]), 0.0))
    time.sleep(1.0)
    direct = ChunkPolicy.load(checkpoint)
    over_ros, called = [], []
    for k in range(repeat + 3):
        stamp = round(1.0 + k / 30, 6)
        news.clear()
        sent = time.perf_counter()
        for camera, publisher in images.items():
            publisher.publish(messages.serialized_image(observation["pixels"][camera], stamp, camera))  # as the sim
        joints.publish(messages.joint_state_message(so101.from_lerobot(observation["agent_pos"]), np.zeros(6), stamp))
        while stamp not in arrived and time.perf_counter() - sent < 10:
            news.wait(0.5)
            news.clear()
        if stamp not in arrived:
            raise SystemExit(f"no chunk for t={stamp} within 10 s")
        time.sleep(0.05)  # the node back in its wait, as between two re-plan ticks
        began = time.perf_counter()
        direct(observation, env.task)
        ended = time.perf_counter()
        if k >= 3:  # the first ones warm up
            over_ros.append(arrived[stamp] - sent)
            called.append(ended - began)
        time.sleep(0.05)
    node.send_signal(2)
    node.wait(timeout=30)
    ros_ms, direct_ms = statistics.median(over_ros) * 1000, statistics.median(called) * 1000
    floor_ms = round_trip_floor(executor, 100) * 1000
    print(f"the floor of any answer over ROS here: a Header out and back between two rclpy processes, p50 "
          f"{floor_ms:.2f} ms: {floor_ms / direct_ms:.1%} of the direct call")
    print(f"request-to-chunk over ROS (policy node in its own process, {torch.get_num_threads()} torch threads): "
          f"p50 {ros_ms:.1f} ms, p90 {percentile(over_ros, 90) * 1000:.1f} ms; policy.py direct p50 {direct_ms:.1f} "
          f"ms; ratio {ros_ms / direct_ms:.3f} (transport and matching {ros_ms - direct_ms:.1f} ms); "
          f"inside the node p50 {statistics.median(inside[3:]) * 1000:.1f} ms")
    executor.remove_node(probe)
    probe.destroy_node()
    return {"ros_ms": ros_ms, "direct_ms": direct_ms, "ratio": ros_ms / direct_ms,
            "inside_ms": statistics.median(inside[3:]) * 1000, "floor_ms": floor_ms}


ECHO = """
import sys
import rclpy
from rclpy.executors import SingleThreadedExecutor
from std_msgs.msg import Header
from act_node.nodes.messages import RELIABLE, SENSOR
sys.path.insert(0, sys.argv[1])
from bench_transport import spin_until_told
rclpy.init()
node = rclpy.create_node("bench_echo")
back = node.create_publisher(Header, "/bench/pong", RELIABLE)
node.create_subscription(Header, "/bench/ping", back.publish, SENSOR, raw=True)  # the bytes, as they came
executor = SingleThreadedExecutor()
executor.add_node(node)
spin_until_told(executor, 0.1)
node.destroy_node()
rclpy.try_shutdown()
"""


def round_trip_floor(executor, repeat: int) -> float:
    """The least any request and answer between two rclpy processes costs here: a std_msgs/Header out with the
    observations' QoS (best effort) and back with the chunks' (reliable), another process's subscription
    publishing what it got, one SingleThreadedExecutor at each end, act_node's profile, nothing computed.
    Median seconds of `repeat` round trips, measured as request_to_chunk measures (this process's executor on
    its own thread, the main thread waiting for the answer)."""
    import subprocess

    from act_node.dds import profile_environment

    echo = subprocess.Popen([sys.executable, "-c", ECHO, str(Path(__file__).parent)],
                            env={**os.environ, **profile_environment()},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    probe = Node("bench_ping")
    came = threading.Event()
    probe.create_subscription(Header, "/bench/pong", lambda _: came.set(), RELIABLE, raw=True)
    ping = probe.create_publisher(Header, "/bench/ping", SENSOR)
    executor.add_node(probe)
    try:
        if echo.stdout.readline().strip() != "ready":
            raise SystemExit("the echo process did not start")
        began = time.perf_counter()
        while ping.get_subscription_count() == 0 or probe.count_publishers("/bench/pong") == 0:
            if time.perf_counter() - began > 30:
                raise SystemExit("the echo process was not discovered within 30 s")
            time.sleep(0.05)
        time.sleep(1.0)
        trips = []
        for k in range(repeat + 10):
            came.clear()
            sent = time.perf_counter()
            ping.publish(Header(frame_id=str(k)))
            if not came.wait(5.0):
                raise SystemExit("no answer from the echo process within 5 s")
            if k >= 10:
                trips.append(time.perf_counter() - sent)
            time.sleep(0.02)
    finally:
        echo.stdin.close()
        echo.wait(timeout=30)
        executor.remove_node(probe)
        probe.destroy_node()
    return statistics.median(trips)


def beside_a_graph(launch: list[str], watcher: str, seconds: float, domain_offset: int,
                   watcher_env: dict | None = None, truth_target: bool = True) -> str:
    """`act-sim launch <launch>` in a domain of its own, and a watcher script (python -c) beside it for
    `seconds` once it sees the graph; the graph is then stopped (SIGINT to its group, SIGKILL after 60 s).
    The watcher's last line of output, or SystemExit with both stderrs. `truth_target`: the sim says where the
    target is (no selector); else the launch's own target source."""
    import signal
    import subprocess

    domain = {"ROS_DOMAIN_ID": str(int(os.environ["ROS_DOMAIN_ID"]) + domain_offset)}  # nothing else hears it
    truth = ["target_source:=truth"] if truth_target else []
    graph = subprocess.Popen([sys.executable, "-m", "act_node.cli", "launch", "clock:=realtime", *truth,
                              "episodes:=1000", "record_video:=false", *launch],
                             env={**os.environ, **domain}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    watched = subprocess.run([sys.executable, "-c", watcher, str(seconds)], capture_output=True, text=True,
                             env={**os.environ, **(watcher_env or {}), **domain}, timeout=seconds + 300)
    os.killpg(graph.pid, signal.SIGINT)
    try:
        graph.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(graph.pid, signal.SIGKILL)
    if watched.returncode != 0:
        raise SystemExit(f"nothing seen of the graph: {watched.stderr[-2000:]}\n{graph.stderr.read()[-2000:]}")
    return watched.stdout.strip().splitlines()[-1]


def realtime_factor(checkpoint: Path | str, label: str, size: tuple[int, int], seconds: float) -> dict:
    """`act-sim launch clock:=realtime` with the policy node on `checkpoint` (its own processes, as a user runs
    it; target from the sim's truth, no selector): sim seconds per wall second from /clock over `seconds`
    from the policy's first chunk on (the sim ticks while the policy node still loads), and the chunks that
    came meanwhile."""
    last = beside_a_graph(["policy:=act", f"checkpoint:={checkpoint}", f"image_height:={size[0]}",
                           f"image_width:={size[1]}"], CLOCK_LISTENER, seconds, 1)
    sim_s, wall_s, chunks = json.loads(last)
    print(f"sim realtime factor, policy node attached ({label}), cameras {size[0]}x{size[1]}: "
          f"{sim_s / wall_s:.3f} ({sim_s:.2f} sim s in {wall_s:.2f} wall s, {chunks} chunks)")
    return {"label": label, "factor": sim_s / wall_s, "chunks": chunks, "wall_s": wall_s}


def graph_images(seconds: float, size: tuple[int, int], with_profile: bool) -> dict:
    """`act-sim launch clock:=realtime camera_every:=1 renderer:=egl` (the expert drives: it takes no images)
    and, in another process, a viewer of the graph's two camera topics (raw, best effort, image_array on
    each): per camera, frames against the ticks /clock announced, ticks without a frame, and how long after
    the tick's /clock message each frame was read, with or without act_node's environment in the viewer."""
    from act_node.dds import profile_environment

    last = beside_a_graph(["policy:=expert", "camera_every:=1", "renderer:=egl", f"image_height:={size[0]}",
                           f"image_width:={size[1]}"], IMAGE_VIEWER, seconds, 2,
                          profile_environment() if with_profile else None)
    result = json.loads(last)
    label = "with act_node's environment" if with_profile else "without it"
    for camera, r in result["cameras"].items():
        print(f"graph cameras {size[0]}x{size[1]} to an outside viewer {label}: {camera} {r['frames']} frames for "
              f"{result['ticks']} ticks ({result['ticks'] / result['wall_s']:.1f} ticks/s), {r['missing']} ticks "
              f"without one, read p50 {r['p50_ms']:.2f} ms, p90 {r['p90_ms']:.2f} ms after the tick's /clock "
              f"(the sim renders both cameras after it)")
    return {**result, "with_profile": with_profile, "size": list(size)}


IMAGE_VIEWER = """
import json, sys, time
import numpy as np, rclpy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image
from act_node.nodes.messages import SENSOR, image_array, image_stamp, seconds_of
rclpy.init()
node = rclpy.create_node("bench_viewer")
clock, frames = {}, {"front": {}, "wrist": {}}
node.create_subscription(Clock, "/clock", lambda m: clock.setdefault(round(seconds_of(m.clock), 6), time.monotonic()),
                         10)
def on_image(camera, data):
    image_array(data)
    frames[camera].setdefault(round(image_stamp(data), 6), time.monotonic())
for camera in frames:
    node.create_subscription(Image, f"/camera/{camera}/image_raw", lambda m, c=camera: on_image(c, m), SENSOR,
                             raw=True)
deadline = time.monotonic() + 240
while not all(frames.values()) and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
if not all(frames.values()):
    sys.exit("no frames within 240 s")
began = time.monotonic()
clock.clear()
for seen in frames.values():
    seen.clear()
while time.monotonic() - began < float(sys.argv[1]):
    rclpy.spin_once(node, timeout_sec=0.1)
ticks = sorted(clock)[:-3]  # the last ticks' frames may still be on their way
result = {"ticks": len(ticks), "wall_s": clock[ticks[-1]] - clock[ticks[0]], "cameras": {}}
for camera, seen in frames.items():
    late = [1000 * (seen[t] - clock[t]) for t in ticks if t in seen]
    result["cameras"][camera] = {"frames": len(late), "missing": sum(t not in seen for t in ticks),
                                 "p50_ms": float(np.median(late)), "p90_ms": float(np.percentile(late, 90))}
print(json.dumps(result))
"""


CLOCK_LISTENER = """
import json, sys, time
import rclpy
from rosgraph_msgs.msg import Clock
from trajectory_msgs.msg import JointTrajectory
from act_node.nodes.messages import RELIABLE, seconds_of
rclpy.init()
node = rclpy.create_node("bench_clock")
seen, chunks = [], [0]
node.create_subscription(Clock, "/clock", lambda m: seen.append((seconds_of(m.clock), time.monotonic())), 10)
node.create_subscription(JointTrajectory, "/act/action_chunk", lambda m: chunks.__setitem__(0, chunks[0] + 1),
                         RELIABLE, raw=True)
deadline = time.monotonic() + 240
while not (seen and chunks[0]) and time.monotonic() < deadline:  # the policy answers: measure from here
    rclpy.spin_once(node, timeout_sec=0.1)
if not (seen and chunks[0]):
    sys.exit(f"within 240 s: {len(seen)} /clock messages, {chunks[0]} chunks")
seen.clear(); chunks[0] = 0
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.1)
sim = seen[-1][0] - seen[0][0]  # the sim's clock runs on across episodes
print(json.dumps([sim, seen[-1][1] - seen[0][1], chunks[0]]))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--only", nargs="+", choices=("chunk", "realtime", "graph_images"),
                        help="some of the figures")
    parser.add_argument("--summary", type=Path, help="also write the chunk and realtime figures here (JSON)")
    parser.add_argument("--checkpoint", type=Path, help="also the realtime factor with this checkpoint's policy "
                        "node (a camera ACT: its own cameras and image size)")
    args = parser.parse_args()
    wanted = set(args.only or ("chunk", "realtime", "graph_images"))
    summary: dict = {}
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    rclpy.init()
    executor = SingleThreadedExecutor()  # one spinning thread: the 2 cores go to inference and DDS
    threading.Thread(target=executor.spin, daemon=True).start()
    if "chunk" in wanted:
        with tempfile.TemporaryDirectory() as scratch:
            env = PickObjectEnv(objects=4, image_size=TRAIN_IMAGE_SIZE)
            record(env, "local/bench", Path(scratch) / "data", episodes=1)
            dataset = LeRobotDataset("local/bench", root=Path(scratch) / "data", video_backend="pyav")
            checkpoint = make_checkpoint(dataset, DOCUMENTED, Path(scratch) / "documented")
            summary["chunk"] = request_to_chunk(executor, checkpoint, env, args.repeat)
            env.close()
    if "realtime" in wanted:
        from act_node.config import shipped_checkpoint

        summary["realtime"] = [realtime_factor(shipped_checkpoint(), "the shipped ACT: no image into ACT, its yaw "
                                               "reader reads both cameras once an episode", (96, 128), args.seconds)]
        with tempfile.TemporaryDirectory() as scratch:
            env = PickObjectEnv(objects=4, image_size=(240, 320))
            record(env, "local/bench", Path(scratch) / "data", episodes=1)
            env.close()
            dataset = LeRobotDataset("local/bench", root=Path(scratch) / "data", video_backend="pyav")
            checkpoint = make_checkpoint(dataset, DOCUMENTED, Path(scratch) / "documented")
            summary["realtime"].append(realtime_factor(checkpoint, "ACT on both cameras, untrained, documented size",
                                                       (240, 320), args.seconds))
        if args.checkpoint:
            from act_node.checkpoints import checkpoint_cameras

            cameras = checkpoint_cameras(args.checkpoint)
            size = next(iter(cameras.values())) if cameras else (96, 128)
            summary["realtime"].append(realtime_factor(args.checkpoint, f"{args.checkpoint}, cameras "
                                                       f"{sorted(cameras) or 'none'}", size, args.seconds))
    if "graph_images" in wanted:
        summary["graph_images"] = [graph_images(args.seconds, (480, 640), profile) for profile in (True, False)]
    executor.shutdown()
    rclpy.try_shutdown()
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
