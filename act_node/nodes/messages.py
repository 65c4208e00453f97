"""Messages in and out: the one place that turns ROS messages into arrays and back, and says what is wrong
with a message it refuses (MessageError). SI units on every topic: radians, metres, seconds."""

from __future__ import annotations

import array
import json
import math
from collections.abc import Callable

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, PointStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import ColorRGBA, Header
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from act_node import so101

TABLE_FRAME = "table"
# Topic QoS (DESIGN.md): cameras and joints best effort (rclpy's sensor-data profile), chunks and targets
# reliable; episode, scene and target latched so that a node starting late still joins the episode.
SENSOR = qos_profile_sensor_data
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
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
def image_message(image: np.ndarray, stamp_s: float, frame: str) -> Image:
    """(H, W, 3) uint8 RGB -> sensor_msgs/Image rgb8."""
    height, width, _ = image.shape
    # rclpy keeps uint8[] as array('B'): handing it one is about 3x faster than bytes for a 480x640 frame
    pixels = array.array("B", np.ascontiguousarray(image, dtype=np.uint8).tobytes())
    return Image(header=header(stamp_s, frame), height=height, width=width, encoding="rgb8", is_bigendian=0,
                 step=width * 3, data=pixels)


def image_array(message: Image, expected: tuple[int, int] | None = None) -> np.ndarray:
    """sensor_msgs/Image (rgb8 or bgr8) -> (H, W, 3) uint8 RGB; MessageError for anything else."""
    if message.encoding not in ENCODINGS:
        raise MessageError(f"image encoding {message.encoding!r} is not supported (expected one of {ENCODINGS})")
    if expected is not None and (message.height, message.width) != tuple(expected):
        raise MessageError(f"image is {message.height}x{message.width}, the policy expects "
                           f"{expected[0]}x{expected[1]}")
    if message.step < message.width * 3 or len(message.data) < message.step * message.height:
        raise MessageError(f"image data is {len(message.data)} bytes with step {message.step}, too short for "
                           f"{message.height}x{message.width}x3")
    rows = np.frombuffer(bytes(message.data), dtype=np.uint8)[: message.step * message.height]
    image = rows.reshape(message.height, message.step)[:, : message.width * 3].reshape(message.height,
                                                                                      message.width, 3)
    return (image[..., ::-1] if message.encoding == "bgr8" else image).copy()  # a writable array of its own


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


def chunk_actions(message: JointTrajectory, fps: float,
                  names: tuple[str, ...] = so101.JOINT_NAMES) -> tuple[float, np.ndarray]:
    """JointTrajectory -> (stamp seconds, actions (steps, joints) radians in `names` order). Refuses an
    empty or non-monotonic chunk, unknown or missing joints, NaN, and spacing other than 1 / fps."""
    if not message.points:
        raise MessageError("chunk has no points")
    missing = [name for name in names if name not in message.joint_names]
    if missing:
        raise MessageError(f"chunk lacks joints {missing} (it names {list(message.joint_names)})")
    order = [list(message.joint_names).index(name) for name in names]
    times = np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in message.points])
    if np.any(np.diff(times) <= 0):
        raise MessageError("chunk's time_from_start is not strictly increasing")
    expected = np.arange(len(times)) / fps + times[0]
    if not np.allclose(times, expected, atol=0.25 / fps):
        raise MessageError(f"chunk points are not spaced 1/{fps:g} s apart")
    rows = []
    for k, point in enumerate(message.points):
        if len(point.positions) != len(message.joint_names):
            raise MessageError(f"chunk point {k} has {len(point.positions)} positions for "
                               f"{len(message.joint_names)} joints")
        rows.append([point.positions[i] for i in order])
    actions = np.array(rows, dtype=np.float64)
    if not np.all(np.isfinite(actions)):
        raise MessageError("chunk holds NaN or inf")
    return seconds_of(message.header.stamp) + float(times[0]), actions


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
