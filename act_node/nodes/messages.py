"""Messages in and out: the one place that turns ROS messages into arrays and back, and says what is wrong
with a message it refuses (MessageError). SI units on every topic: radians, metres, seconds."""

from __future__ import annotations

import array
import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, PointStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import ColorRGBA, Header, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from act_node import so101
from act_node.table_frame import TABLE_FRAME

# Topic QoS (DESIGN.md): cameras and joints best effort (rclpy's sensor-data profile), chunks and targets
# reliable; episode, scene and target latched so that a node starting late still joins the episode.
SENSOR = qos_profile_sensor_data
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
# target/point: latched, with the last 8 kept. A recorder that matches the selector late (seconds, on a loaded
# machine) is then sent the earlier episodes' targets too, not only the newest, and its Recorder files each
# episode's frames under the target stamped in that episode; a subscriber with LATCHED's depth keeps the newest.
TARGETS = QoSProfile(depth=8, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
# act/joint_command: one a tick, each a frame's action for a recorder: reliable, with room for 600 (a lockstep sim
# runs 100-170 ticks a second: 60 held under half a second, and a recorder busy encoding an episode's video on a
# loaded machine lost 30 commands of the next one and dropped it)
COMMANDS = QoSProfile(depth=600, reliability=ReliabilityPolicy.RELIABLE)
# A recorder's cameras and joints: best effort as published, with room for a second of them while it writes
RECORDING = QoSProfile(depth=60, reliability=ReliabilityPolicy.BEST_EFFORT)
ENCODINGS = ("rgb8", "bgr8")


class MessageError(ValueError):
    """A message that cannot be used; the text names what is wrong."""


def parsed(node, parse: Callable, what: str, then: Callable, throttle_s: float = 0.0) -> Callable:
    """A subscription callback: `parse(message)`, then `then(value)`; a MessageError is logged as
    "dropped <what>: <why>" (throttled when `throttle_s` > 0, for streams) and nothing else happens."""
    throttle = {"throttle_duration_sec": throttle_s} if throttle_s > 0 else {}

    def callback(message) -> None:
        try:
            value = parse(message)
        except MessageError as error:
            node.get_logger().error(f"dropped {what}: {error}", **throttle)
            return
        then(value)

    return callback


def sent_at(node, info) -> float:
    """When a message was sent, in seconds of `node`'s clock: its DDS source timestamp where the node runs on the wall
    clock (an arm's graph, on one machine: every node reading one act/run starts the run at the same instant, so a
    scene read after it is after it for the policy too), else the node's now (simulated time has no such stamp)."""
    clock = node.get_clock()
    source_ns = info.get("source_timestamp") if info else None
    if source_ns and not getattr(clock, "ros_time_is_active", False):
        return source_ns * 1e-9
    return clock.now().nanoseconds * 1e-9


def _sec_nanosec(seconds: float, what: str) -> tuple[int, int]:
    """Seconds -> (sec, nanosec in [0, 1e9)), rounded to the nearest nanosecond; a fraction that rounds up
    to a whole second carries into `sec` (2.9999999999 s is 3 s 0 ns, not 2 s 0 ns)."""
    if not math.isfinite(seconds):
        raise ValueError(f"{what} of {seconds} s cannot be stamped: expected a finite number of seconds")
    whole = math.floor(seconds)
    nanosec = round((seconds - whole) * 1e9)  # seconds - whole is exact for a float: no loss here
    if nanosec == 1_000_000_000:
        whole, nanosec = whole + 1, 0
    return int(whole), int(nanosec)


def to_time(seconds: float) -> Time:
    sec, nanosec = _sec_nanosec(seconds, "a time")
    return Time(sec=sec, nanosec=nanosec)


def seconds_of(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def to_duration(seconds: float) -> Duration:
    sec, nanosec = _sec_nanosec(seconds, "a duration")
    return Duration(sec=sec, nanosec=nanosec)


def header(stamp_s: float, frame: str) -> Header:
    return Header(stamp=to_time(stamp_s), frame_id=frame)


# --- images --------------------------------------------------------------------------------------------
# A raw subscription (create_subscription(..., raw=True)) hands a callback the serialized message, and a
# publisher takes one as bytes: that skips rclpy's conversion of Image.data, two copies each way (what they
# cost: bench/bench_transport.py, docs/measured_defaults.md).
# The serialized form is CDR: a 4-byte encapsulation header (representation id, options), then the fields
# in order, each aligned to its size from the header's end.
CDR_LE, CDR_BE, PLAIN_CDR2_LE, PLAIN_CDR2_BE = 1, 0, 7, 6  # representation ids; Image is a final type
_CDR_BYTE_ORDER = {CDR_LE: "<", CDR_BE: ">", PLAIN_CDR2_LE: "<", PLAIN_CDR2_BE: ">"}


@dataclass(frozen=True)
class ImageFields:
    """What image_array needs from an Image, read from a message or its serialized bytes."""

    stamp_s: float
    frame: str
    height: int
    width: int
    encoding: str
    step: int
    data: memoryview  # the pixel rows, step * height bytes or more


def _checked_pixels(image: np.ndarray) -> np.ndarray:
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"an image to publish is (H, W, 3) uint8 RGB, got {image.shape} {image.dtype}")
    return np.ascontiguousarray(image)


def image_message(image: np.ndarray, stamp_s: float, frame: str) -> Image:
    """(H, W, 3) uint8 RGB -> sensor_msgs/Image rgb8; its data is one copy of the pixels."""
    pixels = _checked_pixels(image)
    height, width, _ = pixels.shape
    data = array.array("B")
    data.frombytes(pixels)  # array("B", bytes) would walk the bytes one by one
    # check_fields=True makes the data setter keep an array("B") as it is; without it (rclpy's default) the
    # setter rebuilds the array element by element (docs/measured_defaults.md)
    message = Image(check_fields=True, header=header(stamp_s, frame), height=height, width=width,
                    encoding="rgb8", is_bigendian=0, step=width * 3)
    message.data = data
    return message


def _cdr_string(text: str, offset: int) -> tuple[bytes, int]:
    """A CDR string at `offset` (from the encapsulation's end): padding to 4, uint32 length with the NUL,
    the bytes, the NUL. Returns (bytes, offset after it)."""
    encoded = text.encode() + b"\0"
    padding = -offset % 4
    chunk = b"\0" * padding + struct.pack("<I", len(encoded)) + encoded
    return chunk, offset + len(chunk)


def serialized_image(image: np.ndarray, stamp_s: float, frame: str) -> bytes:
    """(H, W, 3) uint8 RGB -> the serialized sensor_msgs/Image rgb8 (little-endian CDR) that image_message
    would give, for publisher.publish(bytes); the pixels are copied once, into the result."""
    pixels = _checked_pixels(image)
    height, width, _ = pixels.shape
    stamp = to_time(stamp_s)
    body = struct.pack("<iI", stamp.sec, stamp.nanosec)
    frame_id, offset = _cdr_string(frame, len(body))
    body += frame_id
    body += b"\0" * (-offset % 4) + struct.pack("<II", height, width)
    encoding, offset = _cdr_string("rgb8", len(body))
    body += encoding + b"\0"  # is_bigendian
    body += b"\0" * (-(offset + 1) % 4) + struct.pack("<II", width * 3, pixels.nbytes)
    return struct.pack(">HH", CDR_LE, 0) + body + pixels.data


class _CdrReader:
    """A cursor over a serialized message (plain CDR or plain CDR2, either byte order): the encapsulation
    header read and checked, then fields in order, each aligned to its size from the header's end (to at
    most `max_alignment`: 8 in plain CDR); MessageError, naming `what`, when the bytes are no such message."""

    def __init__(self, serialized: bytes | memoryview, what: str):
        view = memoryview(serialized).cast("B")
        if len(view) < 4:
            raise MessageError(f"serialized {what} is {len(view)} bytes, shorter than its 4-byte CDR header")
        self.representation = int.from_bytes(view[:2], "big")
        if self.representation not in _CDR_BYTE_ORDER:
            raise MessageError(f"serialized {what} has CDR representation {self.representation:#06x}, expected "
                               f"one of {[hex(r) for r in _CDR_BYTE_ORDER]}")
        self.what, self.order, self.payload, self.offset = what, _CDR_BYTE_ORDER[self.representation], view[4:], 0

    def _ends_early(self) -> MessageError:
        return MessageError(f"serialized {self.what} ends at byte {len(self.payload)}, inside its fields")

    def read(self, kind: str) -> int:
        size = struct.calcsize(kind)
        self.offset += -self.offset % size
        if self.offset + size > len(self.payload):
            raise self._ends_early()
        (value,) = struct.unpack_from(self.order + kind, self.payload, self.offset)
        self.offset += size
        return value

    def string(self) -> str:
        length = self.read("I")
        if length == 0 or self.offset + length > len(self.payload):
            raise MessageError(f"serialized {self.what} has a string of {length} bytes at byte {self.offset}, "
                               f"beyond its {len(self.payload)} bytes")
        text = bytes(self.payload[self.offset:self.offset + length - 1]).decode(errors="replace")
        self.offset += length
        return text

    def doubles(self) -> np.ndarray:
        """A sequence of float64, read in place."""
        count = self.read("I")
        if not count:  # an empty sequence has no padding
            return np.empty(0)
        self.offset += -self.offset % 8
        if self.offset + 8 * count > len(self.payload):
            raise self._ends_early()
        values = np.frombuffer(self.payload, dtype=np.dtype(self.order + "f8"), count=count, offset=self.offset)
        self.offset += 8 * count
        return values


def _cdr_image_fields(serialized: bytes | memoryview) -> ImageFields:
    """Read the fields of a serialized sensor_msgs/Image (CDR or plain CDR2, either byte order) without
    copying its pixels; MessageError when the bytes are no such message."""
    cdr = _CdrReader(serialized, "image")
    sec, nanosec = cdr.read("i"), cdr.read("I")
    frame = cdr.string()
    height, width = cdr.read("I"), cdr.read("I")
    encoding = cdr.string()
    cdr.read("B")  # is_bigendian: of multi-byte pixels only; rgb8 and bgr8 have none
    step, size = cdr.read("I"), cdr.read("I")
    if cdr.offset + size > len(cdr.payload):
        raise MessageError(f"serialized image promises {size} bytes of data but holds {len(cdr.payload) - cdr.offset}")
    return ImageFields(sec + nanosec * 1e-9, frame, height, width, encoding, step,
                       cdr.payload[cdr.offset:cdr.offset + size])


def image_fields(message: Image | bytes) -> ImageFields:
    """The fields of an Image or of its serialized bytes (from a raw subscription); pixels not copied."""
    if isinstance(message, (bytes, bytearray, memoryview)):
        return _cdr_image_fields(message)
    return ImageFields(seconds_of(message.header.stamp), message.header.frame_id, message.height, message.width,
                       message.encoding, message.step, memoryview(message.data).cast("B"))


def image_array(message: Image | bytes, expected: tuple[int, int] | None = None) -> np.ndarray:
    """sensor_msgs/Image (rgb8 or bgr8), or its serialized bytes from a raw subscription -> (H, W, 3) uint8
    RGB, writable; MessageError for anything else. An rgb8 Image without row padding is not copied: the
    array shares message.data."""
    fields = image_fields(message)
    if fields.encoding not in ENCODINGS:
        raise MessageError(f"image encoding {fields.encoding!r} is not supported (expected one of {ENCODINGS})")
    if expected is not None and (fields.height, fields.width) != tuple(expected):
        raise MessageError(f"image is {fields.height}x{fields.width}, the policy expects "
                           f"{expected[0]}x{expected[1]}")
    if fields.step < fields.width * 3 or len(fields.data) < fields.step * fields.height:
        raise MessageError(f"image data is {len(fields.data)} bytes with step {fields.step}, too short for "
                           f"{fields.height}x{fields.width}x3")
    rows = np.frombuffer(fields.data, dtype=np.uint8, count=fields.step * fields.height)
    image = rows.reshape(fields.height, fields.step)[:, : fields.width * 3].reshape(fields.height, fields.width, 3)
    if fields.encoding == "bgr8":
        image = image[..., ::-1]
    # a copy only where the pixels are reordered, padded or read-only (serialized bytes)
    return np.ascontiguousarray(image) if image.flags.writeable else image.copy()


def image_stamp(message: Image | bytes) -> float:
    """The header stamp in seconds of an Image or of its serialized bytes."""
    return image_fields(message).stamp_s


def camera_info(intrinsics: np.ndarray, height: int, width: int, stamp_s: float, frame: str) -> CameraInfo:
    k = [float(v) for v in intrinsics.flatten()]
    projection = [k[0], k[1], k[2], 0.0, k[3], k[4], k[5], 0.0, k[6], k[7], k[8], 0.0]
    return CameraInfo(header=header(stamp_s, frame), height=height, width=width, distortion_model="plumb_bob",
                      d=[0.0] * 5, k=k, r=[1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0], p=projection)


# --- joints --------------------------------------------------------------------------------------------
def joint_state_message(positions_rad: np.ndarray, velocities: np.ndarray, stamp_s: float) -> JointState:
    return JointState(header=header(stamp_s, ""), name=list(so101.JOINT_NAMES),
                      position=[float(v) for v in positions_rad], velocity=[float(v) for v in velocities])


def joint_positions(message: JointState, names: tuple[str, ...] = so101.JOINT_NAMES) -> np.ndarray:
    """Positions (len(names),) radians, matched by name, not order; MessageError if any is missing or bad."""
    if len(message.position) != len(message.name):
        raise MessageError(f"joint state has {len(message.name)} names but {len(message.position)} positions")
    by_name = dict(zip(message.name, message.position))
    missing = [name for name in names if name not in by_name]
    if missing:
        raise MessageError(f"joint state lacks joints {missing} (it names {list(message.name)})")
    positions = np.array([by_name[name] for name in names], dtype=np.float64)
    if not np.all(np.isfinite(positions)):
        raise MessageError(f"joint state has NaN or inf for "
                           f"{[n for n, v in zip(names, positions) if not math.isfinite(v)]}")
    return positions


def stamped_joint_positions(message: JointState, names: tuple[str, ...] = so101.JOINT_NAMES
                            ) -> tuple[float, np.ndarray]:
    """(stamp seconds, positions (len(names),) radians) of a joint state; MessageError as joint_positions."""
    return seconds_of(message.header.stamp), joint_positions(message, names)


# --- chunks --------------------------------------------------------------------------------------------
def chunk_message(actions_rad: np.ndarray, stamp_s: float, fps: float,
                  names: tuple[str, ...] = so101.JOINT_NAMES) -> JointTrajectory:
    """(steps, joints) radians -> JointTrajectory: point k at k / fps, stamped with the observation's time."""
    points = [JointTrajectoryPoint(positions=[float(v) for v in row], time_from_start=to_duration(k / fps))
              for k, row in enumerate(actions_rad)]
    return JointTrajectory(header=header(stamp_s, ""), joint_names=list(names), points=points)


# A chunk as CDR bytes, for publisher.publish(bytes) and raw subscriptions: rclpy builds and converts a
# 100-point JointTrajectory point by point in Python, struct does both ends at once (the costs: bench/bench_ros.py,
# docs/measured_defaults.md). Plain CDR (XCDR1): doubles aligned to 8,
# everything else to its size, from the encapsulation header's end; an empty sequence has no padding.
_POINT_TAIL = struct.Struct("<IIIiI")  # empty velocities, accelerations, effort; time_from_start sec, nanosec


def _step_durations(steps: int, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """(sec, nanosec) of k / fps for k < steps, as to_duration rounds each (the nearest ns, carried)."""
    times = np.arange(steps) / fps
    whole = np.floor(times)
    nanoseconds = np.round((times - whole) * 1e9)
    carry = nanoseconds == 1e9
    return (whole + carry).astype(np.int64), np.where(carry, 0, nanoseconds).astype(np.int64)


def serialized_chunk(actions_rad: np.ndarray, stamp_s: float, fps: float,
                     names: tuple[str, ...] = so101.JOINT_NAMES) -> bytes:
    """The serialized JointTrajectory (little-endian CDR) of chunk_message's chunk, for publisher.publish(bytes):
    rclpy reads it back field for field equal (padding bytes are zeros here)."""
    actions = np.asarray(actions_rad, dtype="<f8")
    if actions.ndim != 2 or actions.shape[1] != len(names):
        raise ValueError(f"a chunk is (steps, {len(names)}) for joints {list(names)}, got {actions.shape}")
    stamp = to_time(stamp_s)
    parts = [struct.pack(">HH", CDR_LE, 0), struct.pack("<iI", stamp.sec, stamp.nanosec)]
    offset = 8
    frame, offset = _cdr_string("", offset)
    parts.append(frame)
    parts.append(b"\0" * (-offset % 4) + struct.pack("<I", len(names)))
    offset += -offset % 4 + 4
    for name in names:
        text, offset = _cdr_string(name, offset)
        parts.append(text)
    parts.append(b"\0" * (-offset % 4) + struct.pack("<I", len(actions)))
    offset += -offset % 4 + 4
    joints = actions.shape[1]
    seconds, nanoseconds = _step_durations(len(actions), fps)
    start = offset + (-(offset + 4) % 8) + 4  # the first point's first double
    stride = (start - offset) + 8 * joints + 20  # its positions, three empty sequences, the duration
    if stride % 8 == 0 and joints:  # every point has the first one's layout: write them all at once
        block = np.zeros(stride * len(actions), dtype=np.uint8)

        def column(dtype: str, at: int, count: int = 1) -> np.ndarray:
            return np.ndarray((len(actions), count), dtype=np.dtype(dtype), buffer=block, offset=at - offset,
                              strides=(stride, np.dtype(dtype).itemsize))

        column("<u4", offset)[:, 0] = joints
        column("<f8", start, joints)[:] = actions
        column("<i4", start + 8 * joints + 12)[:, 0] = seconds
        column("<u4", start + 8 * joints + 16)[:, 0] = nanoseconds
        return b"".join(parts) + block.tobytes()
    row_bytes = 8 * joints
    for row, sec, nanosec in zip(actions, seconds, nanoseconds):
        count = b"\0" * (-offset % 4) + struct.pack("<I", len(row))
        offset += len(count)
        padding = b"\0" * (-offset % 8 if len(row) else 0)
        offset += len(padding) + row_bytes
        parts += [count, padding, row.tobytes()]
        tail = b"\0" * (-offset % 4) + _POINT_TAIL.pack(0, 0, 0, sec, nanosec)
        offset += len(tail)
        parts.append(tail)
    return b"".join(parts)


def _cdr_chunk_fields(serialized: bytes | memoryview) -> tuple[float, list[str], np.ndarray, list[np.ndarray]]:
    """(stamp seconds, joint names, times_from_start, positions per point) of a serialized JointTrajectory in
    plain CDR; MessageError when the bytes end early. Another representation: rclpy deserializes it."""
    view = memoryview(serialized).cast("B")
    if len(view) >= 4 and int.from_bytes(view[:2], "big") not in (CDR_LE, CDR_BE):
        from rclpy.serialization import deserialize_message  # XCDR2 aligns doubles to 4 and adds size headers

        try:
            message = deserialize_message(bytes(view), JointTrajectory)
        except Exception as error:  # rclpy says RMWError or similar; the bytes are what is wrong
            raise MessageError(f"serialized chunk does not deserialize as a JointTrajectory: {error}") from None
        return _chunk_fields(message)
    cdr = _CdrReader(view, "chunk")
    sec, nanosec = cdr.read("i"), cdr.read("I")
    cdr.string()  # frame_id
    count = cdr.read("I")
    if count > len(cdr.payload):
        raise MessageError(f"serialized chunk names {count} joints in {len(cdr.payload)} bytes")
    names = [cdr.string() for _ in range(count)]
    points = cdr.read("I")
    if points > len(cdr.payload):
        raise MessageError(f"serialized chunk has {points} points in {len(cdr.payload)} bytes")
    times, rows = np.empty(points), []
    for k in range(points):
        first = cdr.offset
        rows.append(cdr.doubles())  # positions
        cdr.doubles(), cdr.doubles(), cdr.doubles()  # velocities, accelerations, effort: not used
        times[k] = cdr.read("i") + cdr.read("I") * 1e-9
        if k == 0 and points > 1:
            regular = _regular_points(cdr.payload, cdr.order, first, cdr.offset - first, len(rows[0]), points)
            if regular is not None:  # every point laid out as the first: read them all at once
                times, positions = regular
                return sec + nanosec * 1e-9, names, times, list(positions)
    return sec + nanosec * 1e-9, names, times, rows


def _regular_points(payload: memoryview, order: str, first: int, stride: int, joints: int, points: int
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """(times, positions (points, joints)) when every point repeats the first one's layout (`stride` bytes
    from `first`: positions, three empty sequences, the duration), as a chunk from chunk_message or
    serialized_chunk does; None otherwise. The layout repeats only when the stride keeps the 8-byte alignment."""
    if stride % 8 or first + stride * points > len(payload) or not joints:
        return None
    start = first + (-(first + 4) % 8) + 4  # the first double
    expected = np.ndarray(stride * points, dtype=np.uint8, buffer=payload, offset=first)

    def column(dtype: str, at: int, count: int = 1) -> np.ndarray:
        return np.ndarray((points, count), dtype=np.dtype(order + dtype), buffer=expected,
                          offset=at - first, strides=(stride, np.dtype(dtype).itemsize))

    empties = start + 8 * joints  # three uint32 counts, then the duration (sec, nanosec)
    if not (np.all(column("u4", first) == joints) and not column("u4", empties, 3).any()):
        return None
    seconds, nanoseconds = column("i4", empties + 12)[:, 0], column("u4", empties + 16)[:, 0]
    return seconds + nanoseconds * 1e-9, column("f8", start, joints)


def _chunk_fields(message: JointTrajectory) -> tuple[float, list[str], np.ndarray, list[np.ndarray]]:
    times = np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in message.points])
    return (seconds_of(message.header.stamp), list(message.joint_names), times,
            [np.asarray(p.positions, dtype=np.float64) for p in message.points])


def chunk_actions(message: JointTrajectory | bytes, fps: float,
                  names: tuple[str, ...] = so101.JOINT_NAMES) -> tuple[float, np.ndarray]:
    """JointTrajectory, or its serialized bytes from a raw subscription -> (stamp seconds, actions (steps,
    joints) radians in `names` order). Refuses an empty or non-monotonic chunk, unknown or missing joints,
    NaN, and spacing other than 1 / fps."""
    if isinstance(message, (bytes, bytearray, memoryview)):
        stamp_s, joint_names, times, rows = _cdr_chunk_fields(message)
    else:
        stamp_s, joint_names, times, rows = _chunk_fields(message)
    if not rows:
        raise MessageError("chunk has no points")
    missing = [name for name in names if name not in joint_names]
    if missing:
        raise MessageError(f"chunk lacks joints {missing} (it names {joint_names})")
    order = [joint_names.index(name) for name in names]
    if np.any(np.diff(times) <= 0):
        raise MessageError("chunk's time_from_start is not strictly increasing")
    expected = np.arange(len(times)) / fps + times[0]
    if not np.allclose(times, expected, atol=0.25 / fps):
        raise MessageError(f"chunk points are not spaced 1/{fps:g} s apart")
    for k, row in enumerate(rows):
        if len(row) != len(joint_names):
            raise MessageError(f"chunk point {k} has {len(row)} positions for {len(joint_names)} joints")
    actions = np.stack(rows)[:, order]
    if not np.all(np.isfinite(actions)):
        raise MessageError("chunk holds NaN or inf")
    return stamp_s + float(times[0]), actions


# --- episodes ------------------------------------------------------------------------------------------
def episode_start_message(stamp_s: float, info: dict) -> Header:
    """/episode/start: stamp = the episode's first tick, frame_id = JSON (episode, seed, task)."""
    return Header(stamp=to_time(stamp_s), frame_id=json.dumps(info))


def episode_start(message: Header) -> tuple[float, dict]:
    """(start seconds, info) from /episode/start; MessageError when frame_id is no JSON object."""
    try:
        info = json.loads(message.frame_id)
    except json.JSONDecodeError:
        info = None
    if not isinstance(info, dict):
        raise MessageError(f"episode start's frame_id is not a JSON object: {message.frame_id!r}")
    return seconds_of(message.stamp), info


def episode_result(message: String):
    """The EpisodeResult /episode/result carries (JSON); MessageError when it does not read as one."""
    from act_node.episodes import EpisodeResult

    try:
        return EpisodeResult.from_dict(json.loads(message.data))
    except (json.JSONDecodeError, ValueError, TypeError) as error:
        raise MessageError(f"episode result is not an EpisodeResult's JSON ({error}): {message.data[:200]!r}") from None


# --- scene and target ------------------------------------------------------------------------------------
SHAPES = {"box": Marker.CUBE, "sphere": Marker.SPHERE, "cylinder": Marker.CYLINDER}


def scene_markers(objects: list[tuple[str, float, float, float, float, float]], stamp_s: float,
                  episode: int) -> MarkerArray:
    """One marker per object: (kind, x, y, yaw, height, footprint) -> a cylinder-ish marker, text = kind,
    namespace = the episode."""
    markers = []
    for index, (kind, x, y, yaw, height, footprint) in enumerate(objects):
        marker = Marker(header=header(stamp_s, TABLE_FRAME), ns=f"episode_{episode}", id=index,
                        type=Marker.CYLINDER, action=Marker.ADD, text=kind)
        marker.pose.position = Point(x=float(x), y=float(y), z=float(height / 2))
        marker.pose.orientation.z, marker.pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
        marker.scale.x = marker.scale.y = float(2 * footprint)
        marker.scale.z = float(height)
        marker.color = ColorRGBA(r=0.8, g=0.6, b=0.2, a=0.6)
        markers.append(marker)
    return MarkerArray(markers=markers)


def scene_objects(message: MarkerArray) -> tuple[float, list[tuple[str, float, float, float]]]:
    """MarkerArray -> (stamp, [(kind, x, y, yaw)]) in the table frame, the stamp the newest marker's (a table with
    nothing on it is a DELETEALL marker alone); MessageError on no markers, another frame or a NaN."""
    if not message.markers:
        raise MessageError("scene message has no markers, so no stamp (an empty table is one DELETEALL marker)")
    objects = []
    for marker in message.markers:
        if marker.action != Marker.ADD:
            continue
        if marker.header.frame_id != TABLE_FRAME:
            raise MessageError(f"object marker {marker.id} is in frame {marker.header.frame_id!r}, expected "
                               f"{TABLE_FRAME!r}")
        q = marker.pose.orientation
        yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
        values = (marker.pose.position.x, marker.pose.position.y, yaw)
        if not all(math.isfinite(v) for v in values):
            raise MessageError(f"object marker {marker.id} ({marker.text}) has NaN or inf in its pose")
        objects.append((marker.text, *values))
    return max(seconds_of(m.header.stamp) for m in message.markers), objects


def point_message(xy: tuple[float, float], stamp_s: float) -> PointStamped:
    return PointStamped(header=header(stamp_s, TABLE_FRAME), point=Point(x=float(xy[0]), y=float(xy[1]), z=0.0))


def target_point(message: PointStamped) -> tuple[float, np.ndarray]:
    """(stamp, xy) from /target/point; MessageError on another frame or a NaN."""
    xy = np.array([message.point.x, message.point.y])
    if message.header.frame_id != TABLE_FRAME:
        raise MessageError(f"target is in frame {message.header.frame_id!r}, expected {TABLE_FRAME!r}")
    if not np.all(np.isfinite(xy)):
        raise MessageError(f"target point has NaN or inf: {xy.tolist()}")
    return seconds_of(message.header.stamp), xy


def topic_names(namespace: str, cameras: tuple[str, ...]) -> dict[str, str]:
    """{what: topic} under `namespace` ("" or "/ns"): what a bag of the graph holds for a dataset (act-sim
    bag2dataset reads them, act-sim ctl bag records them)."""
    prefix = namespace.rstrip("/")
    names = {"command": "act/joint_command", "joints": "joint_states", "target": "target/point",
             "start": "episode/start", "result": "episode/result",
             **{f"camera:{camera}": f"camera/{camera}/image_raw" for camera in cameras}}
    return {what: f"{prefix}/{topic}" for what, topic in names.items()}
