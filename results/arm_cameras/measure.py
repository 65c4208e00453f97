"""The arm graph on the simulated STS3215 bus with cameras on their own clocks (issue 46's "Done when").

1. Serving: `act-sim launch robot:=so101` with two camera nodes reading MJPEG streams at 30 and 25 fps (each at a
   random phase, never the bus's tick: tests/arm_helpers.StreamingCamera, in a process of their own; the simulated
   buses are threads of this one), `launches` launches per checkpoint, each
   run `seconds` from its first applied chunk. Per launch: whether chunks came, the share of the arm's ticks after the
   first chunk it held on a stale chunk (its /diagnostics: `holds`, `ticks`), the joint states that matched no frame
   and the answered frames' ages (the policy's /diagnostics), the policy's refusals.
2. Recording: `teleop:=leader record:=DIR` (a simulated leader moved by a script, the follower's bus in a process
   of its own: ServedBus), the same two cameras, `episodes`
   episodes started and stopped by /act_recorder/start and /act_recorder/stop; each stop's answer and the dataset.

    PYTHONPATH=. .venv/bin/python results/arm_cameras/measure.py --out results/arm_cameras/measure.json

The camera ACT is a tiny one built here as the tests build theirs (2 expert episodes at 48x64, 3 training steps:
it takes image tokens; no shipped checkpoint does), unless --camera-checkpoint names one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the tests' free-running camera stream, as the tests run it
os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(120, 200)))  # away from the tests' and a user's graphs
os.environ.setdefault("ROS_LOCALHOST_ONLY", "1")

from arm_helpers import HOMING, ROBOT_ID, START_RAD  # noqa: E402

from act_node.arm.calibration import so101_calibration  # noqa: E402
from act_node.arm.servo_sim import SimulatedBus  # noqa: E402

LEADER_ID = "sim_leader"
LEADER_HOMING = {"shoulder_pan": 300, "shoulder_lift": -845, "elbow_flex": 612, "wrist_flex": -77, "wrist_roll": 0,
                 "gripper": -1210}  # tests/test_leader.py's: each arm calibrated on its own
RATES = {"front": 30.0, "wrist": 25.0}
SWAY = np.array([1, -1, 1, -1, 1, 0.5])  # how the hand moves the leader's joints, relative to each other
TINY_ACT = ["--policy.dim_model=32", "--policy.dim_feedforward=64", "--policy.n_heads=2",
            "--policy.n_encoder_layers=1", "--policy.n_vae_encoder_layers=1", "--policy.latent_dim=8",
            "--policy.chunk_size=20", "--policy.n_action_steps=10", "--batch_size=2", "--num_workers=0"]


class Watcher:
    """Every node's newest /diagnostics, the arm's as they came, a target said twice a second, the recorder's
    services: an rclpy node spun on a thread of its own."""

    def __init__(self):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from std_srvs.srv import Trigger

        from act_node.nodes import messages

        rclpy.init()
        self.node = rclpy.create_node("arm_cameras_watcher")
        self.reports: dict[str, dict[str, str]] = {}
        self.arm: list[tuple[float, dict[str, str]]] = []
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.on_diagnostics, messages.RELIABLE)
        target = self.node.create_publisher(messages.PointStamped, "target/point", messages.LATCHED)
        self.node.create_timer(0.5, lambda: target.publish(messages.point_message((0.5, 0.3), time.time())))
        self.clients = {name: self.node.create_client(Trigger, f"/act_recorder/{name}") for name in ("start", "stop")}
        self.trigger = Trigger
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def on_diagnostics(self, message) -> None:
        for status in message.status:
            node = status.name.split(":", 1)[0]
            values = {kv.key: kv.value for kv in status.values}
            self.reports[node] = values
            if node == "act_so101":
                self.arm.append((time.monotonic(), values))

    def call(self, name: str, seconds: float = 120.0) -> str:
        client = self.clients[name]
        if not client.wait_for_service(timeout_sec=60.0):
            raise RuntimeError(f"no /act_recorder/{name}")
        future = client.call_async(self.trigger.Request())
        end = time.monotonic() + seconds
        while not future.done() and time.monotonic() < end:
            time.sleep(0.05)
        if not future.done():
            raise RuntimeError(f"/act_recorder/{name} did not answer in {seconds:g} s")
        return ("" if future.result().success else "FAILED: ") + future.result().message

    def reset(self) -> None:
        self.reports.clear()
        self.arm.clear()


def counts(text: str) -> dict[str, int]:
    """A count by reason as diagnostics show it ("chunk stale 3, no step queued 5")."""
    pairs = [item.rsplit(" ", 1) for item in text.split(", ") if item and item != "none"]
    return {reason: int(count) for reason, count in pairs}


def launch(log: Path, *arguments: str) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "act_node.cli", "launch", "robot:=so101", *arguments],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class Streams:
    """The cameras' streams in a process of their own: in this one they took the GIL from the simulated buses'
    threads, which then missed reads (the arm latches a fault after 3 in a row). `path` of each: its pipe."""

    def __init__(self, folder: Path, size, rng):
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # not fork: this process runs rclpy
        self.paths = {name: folder / f"{name}.mjpg" for name in RATES}
        self.stop_event = context.Event()
        phases = {name: float(rng.uniform(0, 1 / fps)) for name, fps in RATES.items()}
        self.process = context.Process(target=_stream, args=(self.paths, tuple(size), phases, self.stop_event))
        self.process.start()
        end = time.monotonic() + 30
        while not all(path.exists() for path in self.paths.values()) and time.monotonic() < end:
            time.sleep(0.05)

    def close(self) -> None:
        self.stop_event.set()
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()


class ServedBus:
    """The follower's simulated bus in a process of its own (`python -m act_node.arm.servo_sim`): as a thread of this
    process it missed three reads in a row on the loaded machine and the arm latched a fault."""

    def __init__(self, calibration: Path):
        self.process = subprocess.Popen([sys.executable, "-m", "act_node.arm.servo_sim", "--calibration",
                                         str(calibration), "--hand-speed", "0"], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        self.port = self.process.stdout.readline().strip()

    def __enter__(self) -> ServedBus:
        return self

    def __exit__(self, *_) -> None:
        self.process.terminate()
        self.process.wait(10)


def _stream(paths: dict, size, phases: dict, stop_event) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from arm_helpers import StreamingCamera

    cameras = [StreamingCamera(path, size, RATES[name], phase_s=phases[name]) for name, path in paths.items()]
    stop_event.wait()
    for camera in cameras:
        camera.close()


def serve(watcher: Watcher, folder: Path, checkpoint: str, size, seconds: float, rng, extra: list[str]) -> dict:
    """One launch: its measures, from its first applied chunk for `seconds`."""
    folder.mkdir(parents=True)
    cal = folder / "cal"
    cal.mkdir()
    so101_calibration(HOMING).save(cal / f"{ROBOT_ID}.json")
    cameras = Streams(folder, size, rng)
    watcher.reset()
    log = folder / "launch.log"
    with SimulatedBus(so101_calibration(HOMING), start_rad=START_RAD) as bus:
        started = time.monotonic()
        process = launch(log, f"port:={bus.port}", f"id:={ROBOT_ID}", f"calibration_dir:={cal}", "policy:=act",
                         f"checkpoint:={checkpoint}", "task:=pick up the cup", "threads:=1",
                         f"camera_fps:={','.join(f'{r:g}' for r in RATES.values())}",
                         f"camera_devices:={','.join(str(p) for p in cameras.paths.values())}", *extra)
        first = None
        try:
            end = started + 180.0
            while time.monotonic() < end and process.poll() is None:
                applied = [at for at, values in watcher.arm if int(values["chunks_applied"]) > 0]
                if applied:
                    first = applied[0]
                    break
                time.sleep(0.2)
            if first is not None:
                time.sleep(seconds)
            policy = dict(watcher.reports.get("act_policy", {}))
        finally:
            stop(process)
            cameras.close()
    text = log.read_text()
    row = {"chunks": first is not None, "first_chunk_after_s": None if first is None else round(first - started, 1),
           "launch_log": str(log)}
    if first is None:
        return {**row, "log_tail": text[-2000:]}
    reports = [values for at, values in watcher.arm if at >= first]
    start, last = reports[0], reports[-1]
    ticks = int(last["ticks"]) - int(start["ticks"])
    stale = counts(last["holds"]).get("chunk stale", 0) - counts(start["holds"]).get("chunk stale", 0)
    return {**row, "ticks": ticks, "held_stale": stale, "held_stale_share": stale / max(ticks, 1),
            "chunks_applied": int(last["chunks_applied"]) - int(start["chunks_applied"]),
            "chunks_rejected": last["chunks_rejected"],
            "policy_refused": policy.get("refused"), "inference_mean_ms": policy.get("inference_mean_ms"),
            "frames": {c: {key: policy.get(f"frames.{c}.{key}") for key in ("matched", "unmatched")}
                       for c in RATES},
            "answered_age_ms": {c: {key: policy.get(f"answered.{c}.age_{key}_ms") for key in ("mean", "max")}
                                for c in RATES},
            "oldest_ms": {c: policy.get(f"answered.{c}.oldest_ms") for c in RATES},
            "said_holding_stale": text.count("holding the arm: chunk stale"), "said_no_chunk": text.count("no chunk:")}


def record(watcher: Watcher, folder: Path, episodes: int, seconds: float, rng) -> dict:
    """teleop:=leader record:=DIR: `episodes` episodes through ~/start and ~/stop, the leader moving."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    folder.mkdir(parents=True)
    cal = folder / "cal"
    cal.mkdir()
    so101_calibration(HOMING).save(cal / f"{ROBOT_ID}.json")
    so101_calibration(LEADER_HOMING).save(cal / f"{LEADER_ID}.json")
    size = (96, 128)
    cameras = Streams(folder, size, rng)
    watcher.reset()
    log, root = folder / "launch.log", folder / "data"
    answers = []
    with ServedBus(cal / f"{ROBOT_ID}.json") as bus, \
            SimulatedBus(so101_calibration(LEADER_HOMING), start_rad=START_RAD) as leader:
        process = launch(log, f"port:={bus.port}", f"id:={ROBOT_ID}", f"calibration_dir:={cal}", "teleop:=leader",
                         f"leader_port:={leader.port}", f"leader_id:={LEADER_ID}", f"record:={root}",
                         "repo_id:=local/arm_cameras", "task:=pick up the cup", "policy:=expert",
                         f"camera_fps:={','.join(f'{r:g}' for r in RATES.values())}",
                         f"camera_devices:={','.join(str(p) for p in cameras.paths.values())}")
        try:
            end = time.monotonic() + 180.0
            while time.monotonic() < end and not ("act_recorder" in watcher.reports and all(
                    int(watcher.reports.get(f"act_camera_{c}", {}).get("frames_published", 0)) for c in RATES)):
                time.sleep(0.5)
            for episode in range(episodes):
                answers.append(watcher.call("start"))
                for k in range(int(seconds * 20)):  # a hand moves the leader; the follower follows
                    with leader.physics_lock:
                        leader.physics.q = START_RAD + 0.25 * np.sin(k / 15 + episode) * SWAY
                    time.sleep(0.05)
                answers.append(watcher.call("stop"))
            time.sleep(1.5)
            recorder = dict(watcher.reports.get("act_recorder", {}))
        finally:
            stop(process)
            cameras.close()
    kept = [re.search(r"episode saved: (\d+) frames \((\d+) incomplete", a) for a in answers if a.startswith("stop")]
    frames = [(int(m[1]), int(m[2])) for m in kept if m]
    dataset = LeRobotDataset("local/arm_cameras", root=root)
    return {"answers": answers, "kept": len(frames), "episodes": episodes,
            "complete_share_min": min((f / (f + i) for f, i in frames), default=0.0),
            "dataset_episodes": dataset.meta.total_episodes,
            "dataset_lengths": [int(e["length"]) for e in dataset.meta.episodes],
            "frames": {key: value for key, value in recorder.items() if key.startswith("frames.")},
            "launch_log": str(log)}


def tiny_camera_act(folder: Path) -> Path:
    """A tiny ACT that takes the front and wrist images at 48x64 (tests/conftest.py's tiny_checkpoint)."""
    from act_node.record import record as record_episodes
    from act_node.tabletop.env import PickObjectEnv
    from act_node.training import train

    env = PickObjectEnv(objects=2, target_source="truth", max_steps=150, image_size=(48, 64))
    record_episodes(env, "local/act_node_pick", folder / "data", episodes=2)
    env.close()
    return train(folder / "data", "local/act_node_pick", folder / "run", steps=3, device="cpu", extra=TINY_ACT)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=40.0, help="each launch, from its first applied chunk")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--episode-seconds", type=float, default=5.0)
    parser.add_argument("--camera-checkpoint", default="", help="a camera ACT (default: a tiny one built here)")
    parser.add_argument("--skip", nargs="*", default=[], choices=("shipped", "camera", "record"))
    parser.add_argument("--frame-max-age", default="", help="serve with this frame_max_age:= (0: only frames within "
                        "frame_skew_s of the joint states' stamp, the match before issue 46; default: the graph's)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "measure.json"))
    args = parser.parse_args()
    rng = np.random.default_rng()
    work = Path(tempfile.mkdtemp(prefix="arm_cameras_"))
    watcher = Watcher()
    report = {"rates_fps": RATES, "ros_domain_id": os.environ["ROS_DOMAIN_ID"], "load_before": os.getloadavg(),
              "frame_max_age": args.frame_max_age or "the graph's default", "argv": sys.argv[1:]}
    checkpoints = {}
    if "shipped" not in args.skip:
        checkpoints["shipped"] = (str(ROOT / "models" / "act_target_tool_yaw"), (96, 128))
    if "camera" not in args.skip:
        camera = args.camera_checkpoint or str(tiny_camera_act(work / "tiny"))
        checkpoints["camera"] = (camera, (48, 64))
    for name, (checkpoint, size) in checkpoints.items():
        extra = [f"frame_max_age:={args.frame_max_age}"] if args.frame_max_age else []
        rows, refused = [], []
        while len(rows) < args.launches and len(refused) < 3:
            folder = work / f"{name}_{len(rows) + len(refused)}"
            row = serve(watcher, folder, checkpoint, size, args.seconds, rng, extra)
            # the simulated bus (a thread of this process) not answering the arm node's start: no launch of the
            # policy at all; said, and launched again
            (refused if "refusing to start" in row.get("log_tail", "") else rows).append(row)
        report[name] = {"checkpoint": checkpoint, "image_size": size, "launches": rows,
                        "arm_refused_to_start": [r["log_tail"][-400:] for r in refused],
                        "launches_with_chunks": sum(r["chunks"] for r in rows),
                        "held_stale_share_max": max((r.get("held_stale_share", 1.0) for r in rows), default=None)}
        print(json.dumps({name: {k: v for k, v in report[name].items() if k != "launches"}}), flush=True)
    if "record" not in args.skip:
        report["record"] = record(watcher, work / "record", args.episodes, args.episode_seconds, rng)
        print(json.dumps({k: v for k, v in report["record"].items() if k != "answers"}), flush=True)
    report["load_after"] = os.getloadavg()
    out = Path(args.out)
    previous = json.loads(out.read_text()) if out.is_file() else {}
    runs = {**previous.get("runs", {}), **{part: {"argv": sys.argv[1:], "load_before": report["load_before"],
                                                 "load_after": report["load_after"]}
                                          for part in ("shipped", "camera", "record") if part in report}}
    out.write_text(json.dumps({**previous, **report, "runs": runs}, indent=1) + "\n")  # the parts run replaced
    print(f"written {args.out} (work folder {work})")
    watcher.executor.shutdown()
    os._exit(0)


if __name__ == "__main__":
    main()
