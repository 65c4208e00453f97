"""Camera frames between two processes over rclpy and Fast DDS, with and without act_node's profile, in one run.

For each image size, each configuration runs once per round, in turn (ratios side by side on a loaded machine):
  default        neither process gets act_node.dds.profile_environment(): what the graph did before
  dds profile    both load act_node/dds/fastdds.xml, without the malloc tunables
  profile        both get all of profile_environment() (the Fast DDS profile and glibc malloc tunables)
  profile, raw   the same, with serialized_image published as bytes, a raw subscription, image_array(bytes)
  writer only    only the publisher gets it: a user's own node receiving from act_node's sim node
Every configuration builds and reads messages with this tree's image_message and image_array.
An outside process publishes two cameras at --rate Hz with best effort (rclpy's sensor-data QoS, the graph's
camera QoS); a receiving process counts what arrives whole and how late: latency is from the stamp, taken
before the message is built, to the end of image_array in the receiver, so it holds every stage below.
Fast DDS reads its profile once per process, so both ends run as child processes of this one.

Then the per-frame cost of each stage without DDS, in a process without and one with the malloc tunables:
building the message (the code before this change, image_message, serialized_image), rclpy's conversion and
CDR serialization (what publish does before Fast DDS), the reverse on receipt, and image_array on a message
and on serialized bytes.

Run: .venv/bin/python bench/bench_transport.py [--frames 150] [--rounds 2] [--sizes 480x640 720x1280]
"""

from __future__ import annotations

import argparse
import array
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from domains import claim_domains  # noqa: E402  (tests/domains.py: the ROS domains a run claims)

CAMERAS = ("front", "wrist")
CONFIGURATIONS = {  # name: (publisher's environment, receiver's, serialized bytes both ends)
    "default": ("none", "none", False),
    "dds profile": ("dds", "dds", False),
    "profile": ("all", "all", False),
    "profile, raw": ("all", "all", True),
    "writer only": ("all", "none", False),
}


def frame_for(size: tuple[int, int], sequence: int) -> np.ndarray:
    """A noise frame (H, W, 3) uint8 whose first 4 bytes carry its sequence number, so the receiver can
    check that a frame arrived whole and find the gaps."""
    frame = np.random.default_rng(sequence % 7).integers(0, 256, (*size, 3), dtype=np.uint8)
    frame.reshape(-1)[:4] = np.frombuffer(int(sequence).to_bytes(4, "little"), np.uint8)
    return frame


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- the two ends -----------------------------------------------------------------------------------------
def publish(size: tuple[int, int], frames: int, rate_hz: float, raw: bool) -> None:
    """The outside process: two cameras at rate_hz, best effort; prints its own costs as JSON."""
    import rclpy
    from sensor_msgs.msg import Image

    from act_node.nodes import messages

    rclpy.init()
    node = rclpy.create_node("bench_cameras")
    publishers = [node.create_publisher(Image, f"/bench/{c}/image_raw", messages.SENSOR) for c in CAMERAS]
    deadline = time.time() + 30
    while any(p.get_subscription_count() == 0 for p in publishers) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the receiver's side of the match settles too: best effort drops what it sends before
    build = messages.serialized_image if raw else messages.image_message
    pictures = [frame_for(size, k) for k in range(7)]  # the noise repeats with period 7, the numbers do not
    publish_s, started, cpu = [], time.perf_counter(), cpu_seconds()
    for k in range(frames):
        picture = pictures[k % 7]
        picture.reshape(-1)[:4] = np.frombuffer(k.to_bytes(4, "little"), np.uint8)
        for camera, publisher in zip(CAMERAS, publishers):
            message = build(picture, time.time(), f"{camera}_optical")  # stamped with the wall clock
            began = time.perf_counter()
            publisher.publish(message)
            publish_s.append(time.perf_counter() - began)
        time.sleep(max(0.0, started + (k + 1) / rate_hz - time.perf_counter()))
    cpu = cpu_seconds() - cpu
    print(json.dumps({"publish_ms": 1000 * float(np.median(publish_s)),
                      "cpu_ms": 1000 * cpu / (frames * len(CAMERAS))}), flush=True)
    time.sleep(0.5)
    node.destroy_node()
    rclpy.try_shutdown()


def spin_until_told(executor, timeout_sec: float = 0.05) -> None:
    """A child end of a bench: say "ready" on stdout, then spin until a line on stdin or its end (the parent's
    way to stop it without a signal, which rclpy's handlers would take)."""
    told = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), told.set()), daemon=True).start()
    print("ready", flush=True)
    while not told.is_set():
        executor.spin_once(timeout_sec=timeout_sec)


def receive(size: tuple[int, int], raw: bool) -> None:
    """The receiving process: image_array on every frame; on a line on stdin, prints what arrived as JSON."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image

    from act_node.nodes import messages

    arrived: dict[str, list[tuple[int, float, bool]]] = {c: [] for c in CAMERAS}  # (sequence, latency s, whole)
    # every 61st byte of each noise pattern: enough to tell a whole frame from a torn or shifted one, cheap
    # enough (a full comparison of a 720x1280 frame costs the receiver 0.5 ms) not to slow what it measures
    expected = {k: frame_for(size, k).reshape(-1)[4::61].copy() for k in range(7)}
    first_cpu: list[float] = []  # CPU seconds at the first frame: the cost per frame leaves out start-up

    def on_image(camera: str, message) -> None:
        if not first_cpu:
            first_cpu.append(cpu_seconds())
        image = messages.image_array(message, expected=size)
        latency = time.time() - messages.image_stamp(message)
        sequence = int.from_bytes(image.reshape(-1)[:4].tobytes(), "little")
        whole = bool(np.array_equal(image.reshape(-1)[4::61], expected[sequence % 7]))
        arrived[camera].append((sequence, latency, whole))

    rclpy.init()
    node = rclpy.create_node("bench_receiver")
    for camera in CAMERAS:
        node.create_subscription(Image, f"/bench/{camera}/image_raw", lambda m, c=camera: on_image(c, m),
                                 messages.SENSOR, raw=raw)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin_until_told(executor)
    cpu = cpu_seconds() - (first_cpu[0] if first_cpu else cpu_seconds())
    count = sum(len(v) for v in arrived.values())
    print(json.dumps({"arrived": arrived, "cpu_ms": 1000 * cpu / max(count, 1)}), flush=True)
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()


def environment(kind: str, domain: int) -> dict[str, str]:
    """A child's environment: "none" without act_node's variables, "dds" with the profile file only, "all"
    with everything profile_environment() gives."""
    from act_node.dds import PROFILE_VARIABLES, profile_environment

    base = {k: v for k, v in os.environ.items() if k not in (*PROFILE_VARIABLES, "GLIBC_TUNABLES")}
    base.update(ROS_DOMAIN_ID=str(domain), PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1]),
                                                                        os.environ.get("PYTHONPATH", "")]))
    added = profile_environment(base)
    if kind == "dds":
        added = {k: v for k, v in added.items() if k in PROFILE_VARIABLES}
    return {**base, **(added if kind != "none" else {})}


def run_configuration(name: str, size: tuple[int, int], frames: int, rate_hz: float, domain: int) -> dict:
    """One receiver and one publisher process for a configuration; what arrived, gaps and latencies."""
    writer, reader, raw = CONFIGURATIONS[name]
    shape = f"{size[0]}x{size[1]}"
    receiver = subprocess.Popen([sys.executable, __file__, "--role", "receive", "--sizes", shape,
                                 *(["--raw"] if raw else [])], env=environment(reader, domain),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if receiver.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the receiver for {name!r} did not start")
        sender = subprocess.run([sys.executable, __file__, "--role", "publish", "--sizes", shape, "--frames",
                                 str(frames), "--rate", str(rate_hz), *(["--raw"] if raw else [])],
                                env=environment(writer, domain), stdout=subprocess.PIPE, text=True,
                                check=True, timeout=120)
        receiver.stdin.write("stop\n")
        receiver.stdin.flush()
        received = json.loads(receiver.stdout.readline())
        receiver.wait(timeout=30)
    finally:
        if receiver.poll() is None:
            receiver.kill()
    sent = json.loads(sender.stdout.strip().splitlines()[-1])
    latencies, gaps, whole = [], 0, 0
    for samples in received["arrived"].values():
        sequences = sorted(s for s, _, _ in samples)
        missing = sorted(set(range(frames)) - set(sequences))
        gaps += sum(1 for i, k in enumerate(missing) if i == 0 or missing[i - 1] != k - 1)  # runs of losses
        latencies += [latency for _, latency, _ in samples]
        whole += sum(ok for _, _, ok in samples)
    return {"sent": frames * len(CAMERAS), "received": len(latencies), "whole": whole, "gaps": gaps,
            "p50_ms": 1000 * float(np.percentile(latencies, 50)) if latencies else float("nan"),
            "p90_ms": 1000 * float(np.percentile(latencies, 90)) if latencies else float("nan"),
            "publish_ms": sent["publish_ms"], "sender_cpu_ms": sent["cpu_ms"], "receiver_cpu_ms": received["cpu_ms"]}


# --- stage costs in this process ---------------------------------------------------------------------------
def median_ms(work, count: int = 60) -> float:
    times = []
    for _ in range(count):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return 1000 * float(np.median(times))


def stage_costs(size: tuple[int, int]) -> dict[str, float]:
    """Milliseconds per frame of each stage, in this process (no DDS)."""
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import Image

    from act_node.nodes import messages

    frame = frame_for(size, 1)

    def message_before(image: np.ndarray) -> Image:  # image_message up to commit e8ebe74
        pixels = array.array("B", np.ascontiguousarray(image, dtype=np.uint8).tobytes())
        return Image(header=messages.header(1.0, "c"), height=size[0], width=size[1], encoding="rgb8",
                     is_bigendian=0, step=size[1] * 3, data=pixels)

    def array_before(message: Image) -> np.ndarray:  # image_array up to commit e8ebe74
        rows = np.frombuffer(bytes(message.data), dtype=np.uint8)[: message.step * message.height]
        return rows.reshape(message.height, message.width, 3).copy()

    message = messages.image_message(frame, 1.0, "c")
    serialized = serialize_message(message)
    received = deserialize_message(serialized, Image)
    return {
        "numpy copy of the frame (scale)": median_ms(frame.copy),
        "build: before (array from bytes, Image(data=))": median_ms(lambda: message_before(frame)),
        "build: image_message": median_ms(lambda: messages.image_message(frame, 1.0, "c")),
        "build: serialized_image": median_ms(lambda: messages.serialized_image(frame, 1.0, "c")),
        "rclpy serialize_message(Image) (publish's part)": median_ms(lambda: serialize_message(message)),
        "rclpy deserialize_message(Image) (take's part)": median_ms(lambda: deserialize_message(serialized, Image)),
        "read: before (bytes(data), copy)": median_ms(lambda: array_before(received)),
        "read: image_array(Image)": median_ms(lambda: messages.image_array(received)),
        "read: image_array(serialized bytes)": median_ms(lambda: messages.image_array(serialized)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=150, help="frames per camera and configuration")
    parser.add_argument("--rate", type=float, default=30.0, help="frames per second per camera")
    parser.add_argument("--rounds", type=int, default=2, help="runs of every configuration, in turn")
    parser.add_argument("--sizes", nargs="+", default=["480x640", "720x1280"], help="HxW")
    parser.add_argument("--configurations", nargs="+", default=list(CONFIGURATIONS), choices=list(CONFIGURATIONS))
    parser.add_argument("--summary", type=Path, help="also write each configuration's totals here (JSON)")
    parser.add_argument("--role", choices=["publish", "receive", "stages"], help=argparse.SUPPRESS)
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [tuple(int(v) for v in text.split("x")) for text in args.sizes]
    if args.role == "publish":
        return publish(sizes[0], args.frames, args.rate, args.raw)
    if args.role == "receive":
        return receive(sizes[0], args.raw)
    if args.role == "stages":
        return print(json.dumps(stage_costs(sizes[0])))

    from tqdm import tqdm

    domain, _lock = claim_domains()
    load_before = os.getloadavg()
    runs = [(size, name, r) for size in sizes for r in range(args.rounds) for name in args.configurations]
    results: dict[tuple, list[dict]] = {}
    for size, name, _ in tqdm(runs, desc="transport runs", unit="run"):
        results.setdefault((size, name), []).append(run_configuration(name, size, args.frames, args.rate, domain))
    load_after = os.getloadavg()
    print(f"\n{os.cpu_count()} cores, load average {load_before[0]:.1f} before and {load_after[0]:.1f} after; "
          f"{args.frames} frames x {len(CAMERAS)} cameras at {args.rate:g} Hz per run, best effort, "
          f"{args.rounds} rounds (one line per run)")
    print(f"{'size':>9} {'configuration':<13} {'received':>9} {'whole':>6} {'gaps':>5} {'p50 ms':>7} {'p90 ms':>7} "
          f"{'publish ms':>10} {'send cpu':>8} {'recv cpu':>8}")
    for (size, name), runs_of in results.items():
        for r in [*runs_of, None]:
            if r is None:  # the configuration's summary: all runs' frames, the median run's latencies
                r = {k: sum(x[k] for x in runs_of) for k in ("received", "sent", "whole", "gaps")}
                r.update({k: float(np.median([x[k] for x in runs_of])) for k in runs_of[0] if k.endswith("_ms")})
                print(f"{'':>9} {'median run':<13}", end=" ")
            else:
                print(f"{size[0]:>4}x{size[1]:<4} {name:<13}", end=" ")
            print(f"{r['received']:>4}/{r['sent']:<4} {r['whole']:>6} {r['gaps']:>5} {r['p50_ms']:>7.2f} "
                  f"{r['p90_ms']:>7.2f} {r['publish_ms']:>10.2f} {r['sender_cpu_ms']:>8.2f} "
                  f"{r['receiver_cpu_ms']:>8.2f}")
    if args.summary:
        summary: dict = {}
        for (size, name), runs_of in results.items():
            summary.setdefault(f"{size[0]}x{size[1]}", {})[name] = {
                **{k: sum(x[k] for x in runs_of) for k in ("received", "sent", "whole", "gaps")},
                **{k: float(np.median([x[k] for x in runs_of])) for k in ("p50_ms", "p90_ms")},
                "load": [load_before[0], load_after[0]]}
        args.summary.write_text(json.dumps(summary, indent=1))
    print("(whole: frames identical to what was sent; gaps: runs of consecutive lost frames; latency: stamp "
          "before building to the end of image_array; cpu: process CPU ms per frame)")
    for size in sizes:
        costs = {kind: json.loads(subprocess.run(
            [sys.executable, __file__, "--role", "stages", "--sizes", f"{size[0]}x{size[1]}"],
            env=environment(kind, domain), stdout=subprocess.PIPE, text=True, check=True).stdout.splitlines()[-1])
            for kind in ("none", "all")}
        print(f"\nstage costs per frame, {size[0]}x{size[1]}, median ms, no DDS: {'plain':>7} {'tunables':>8}")
        for stage in costs["none"]:
            print(f"  {stage:<50} {costs['none'][stage]:7.3f} {costs['all'][stage]:8.3f}")


if __name__ == "__main__":
    main()
