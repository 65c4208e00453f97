"""The arm node's bus loop at 30 fps, measured side by side in one run: alone, then with the ACT policy node
running beside it (another process, answering the arm's joint states and two cameras as fast as it can).

  tick period   seconds between bus-loop tick starts (p50, p99), and the ratio with / without the policy
  jitter        |period - 1/fps| (p50, p99), and the ratio

The arm: act_node.nodes.arm_node over LeRobot's FeetechMotorsBus on the simulated STS3215 bus (a pty, the
first-order servo model, in a process of its own), the real driver stack; the policy: an untrained ACT of
LeRobot's documented size for this task (bench_policy.DOCUMENTED) on the CPU, so inference competes for the
cores as on a laptop.

  --expert-speeds   the scripted expert's joint speeds over 20 episodes (the velocity bound's measurement)

Run: .venv/bin/python bench/bench_arm.py [--seconds 10] [--policy-nice 10]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

FPS = 30.0
IMAGE_SIZE = (96, 128)


def expert_speeds(episodes: int = 20) -> None:
    from act_node import so101
    from act_node.tabletop.env import PickObjectEnv
    from act_node.tabletop.expert import ScriptedExpert

    env = PickObjectEnv(objects=4, cameras=(), image_size=(48, 64), target_source="truth")
    peaks = []
    for seed in range(episodes):
        observation, _ = env.reset(seed=seed)
        expert = ScriptedExpert(env)
        expert.reset(observation)
        plan = so101.from_lerobot(expert.chunk(observation, expert.plan_steps))  # (steps, 6) radians
        peaks.append(np.abs(np.diff(plan, axis=0)).max(axis=0) * env.fps)
    env.close()
    peaks = np.array(peaks)
    print(f"expert joint speed, max over {episodes} episodes (rad/s):")
    for name, value in zip(so101.JOINT_NAMES, peaks.max(axis=0)):
        print(f"  {name:14s} {value:5.2f}")


def summary(periods: list[float]) -> dict:
    periods = np.array(periods)
    jitter = np.abs(periods - 1.0 / FPS)
    return {"period_p50": np.percentile(periods, 50), "period_p99": np.percentile(periods, 99),
            "jitter_p50": np.percentile(jitter, 50), "jitter_p99": np.percentile(jitter, 99), "ticks": len(periods)}


def make_checkpoint_folder(scratch: Path) -> Path:
    from bench_policy import DOCUMENTED, make_checkpoint
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from act_node.record import record
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=2, image_size=IMAGE_SIZE, target_source="truth")
    record(env, "local/bench_arm", scratch / "data", episodes=1)
    env.close()
    dataset = LeRobotDataset("local/bench_arm", root=scratch / "data", video_backend="pyav")
    return make_checkpoint(dataset, DOCUMENTED, scratch / "documented")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds measured per phase")
    parser.add_argument("--expert-speeds", action="store_true")
    parser.add_argument("--policy-nice", type=int, default=0, help="run the policy node at this niceness")
    args = parser.parse_args()
    if args.expert_speeds:
        expert_speeds()
        return

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image

    from act_node.nodes import messages
    from act_node.nodes.arm_node import ArmNode
    from act_node.nodes.messages import LATCHED, SENSOR

    rclpy.init()
    executor = SingleThreadedExecutor()
    threading.Thread(target=executor.spin, daemon=True).start()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        print("building an untrained ACT checkpoint (documented size) ...", flush=True)
        checkpoint = make_checkpoint_folder(scratch)
        calibration = scratch / "calibration" / "bench.json"
        # the servos in a process of their own, as real ones are: they take no GIL from the arm node
        bus = subprocess.Popen([sys.executable, "-m", "act_node.arm.servo_sim", "--calibration", str(calibration)],
                               stdout=subprocess.PIPE, text=True)
        port = bus.stdout.readline().strip()
        try:
            arm = ArmNode(parameter_overrides=[Parameter("port", value=port), Parameter("robot_id", value="bench"),
                                               Parameter("calibration_dir", value=str(scratch / "calibration"))])
            feeder = Node("bench_cameras")  # what camera drivers would publish, at the arm's rate
            cameras = {c: feeder.create_publisher(Image, f"/camera/{c}/image_raw", SENSOR) for c in ("front", "wrist")}
            target = feeder.create_publisher(messages.PointStamped, "/target/point", LATCHED)
            frame = np.full((*IMAGE_SIZE, 3), 90, np.uint8)

            def publish_frames():
                now = time.time()
                for name, publisher in cameras.items():
                    publisher.publish(messages.image_message(frame, now, name))
                target.publish(messages.point_message((0.5, 0.25), now))

            feeder.create_timer(1.0 / FPS, publish_frames)
            executor.add_node(arm)
            executor.add_node(feeder)

            time.sleep(1.0)
            begin = len(arm.loop_periods)
            time.sleep(args.seconds)
            alone = summary(arm.loop_periods[begin:])

            policy = subprocess.Popen(
                ["nice", "-n", str(args.policy_nice), sys.executable, "-m", "act_node.nodes.policy_node",
                 "--ros-args", "-p", f"checkpoint:={checkpoint}",
                 "-p", "infer:=latest", "-p", "run_on_start:=true", "-p", "task:=pick up the cup",
                 "-p", "skew_s:=0.03"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.time() + 120
                while arm.control.ledger.received == 0 and time.time() < deadline:
                    time.sleep(0.2)
                if arm.control.ledger.received == 0:
                    raise SystemExit("the policy node sent no chunk in 120 s")
                received = arm.control.ledger.received
                begin = len(arm.loop_periods)
                time.sleep(args.seconds)
                beside = summary(arm.loop_periods[begin:])
                chunks = arm.control.ledger.received - received
            finally:
                policy.terminate()
                policy.wait(timeout=30)
            executor.remove_node(arm)
            arm.destroy_node()
        finally:
            bus.terminate()
            bus.wait(timeout=10)
    executor.shutdown()
    rclpy.try_shutdown()

    print(f"\nbus loop at {FPS:g} fps, {args.seconds:g} s per phase; the policy (niceness {args.policy_nice}) sent "
          f"{chunks} chunks ({chunks / args.seconds:.1f}/s) while measured; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    print(f"{'':22s}{'alone':>10s}{'with policy':>14s}{'ratio':>8s}")
    for key, label in (("period_p50", "tick period p50 (ms)"), ("period_p99", "tick period p99 (ms)"),
                       ("jitter_p50", "jitter p50 (ms)"), ("jitter_p99", "jitter p99 (ms)")):
        ratio = beside[key] / alone[key] if alone[key] > 0 else float("nan")
        print(f"{label:22s}{alone[key] * 1e3:10.2f}{beside[key] * 1e3:14.2f}{ratio:8.2f}")
    print(f"{'ticks':22s}{alone['ticks']:10d}{beside['ticks']:14d}")


if __name__ == "__main__":
    main()
