"""Cameras: pinhole intrinsics, poses in the table frame, and the OpenGL matrices pybullet renders with.

A camera is fixed in the table frame (`front`) or rides on an arm link (`wrist`). Its optical frame
follows ROS (z forward, x right, y down), so `intrinsics()` and `optical_pose()` fill a CameraInfo and a
transform directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from act_node.table_frame import CAMERA_NAMES

if TYPE_CHECKING:
    from act_node.tabletop.robot import Robot
    from act_node.tabletop.world import World

NEAR_M, FAR_M = 0.01, 3.0
# "auto" draws with EGL from this many pixels a frame up, with TinyRenderer below. TinyRenderer's time grows
# with the pixels; EGL on Mesa's llvmpipe costs a roughly fixed time a frame that grows slowly: where the two
# cross (bench/bench_render.py; docs/measured_defaults.md). On a GPU's EGL driver the crossover is likely lower.
EGL_FROM_PIXELS = 32_000


def auto_renderer(specs: list[CameraSpec]) -> str:
    """What "auto" becomes for these cameras: "tiny" when the largest frame is under EGL_FROM_PIXELS (and when
    there is no camera), else "auto" still: the world then draws with EGL where its plugin loads."""
    largest = max((spec.height * spec.width for spec in specs), default=0)
    return "auto" if largest >= EGL_FROM_PIXELS else "tiny"
# The cameras this table-top has: fixed ones by eye and look-at point (table frame, metres), arm ones by link.
CAMERAS = {
    "front": dict(eye=(0.5, 0.52, 0.34), target=(0.5, 0.2, 0.0), fov_y_deg=50.0),  # across the table, at the reach
    "top": dict(eye=(0.5, 0.2, 0.75), target=(0.5, 0.2, 0.0), fov_y_deg=40.0),  # straight down over the reach
    "wrist": dict(link="wrist_camera", fov_y_deg=70.0),  # on the gripper, looking along the jaws
}
assert tuple(CAMERAS) == CAMERA_NAMES, "the cameras must be act_node.table_frame.CAMERA_NAMES, in order"


@dataclass(frozen=True)
class CameraSpec:
    name: str
    height: int = 240
    width: int = 320
    fov_y_deg: float = 50.0
    # fixed cameras: eye and look-at point in the table frame; arm cameras: the link they ride on
    eye: tuple[float, float, float] | None = None
    target: tuple[float, float, float] | None = None
    link: str | None = None

    def __post_init__(self):
        if (self.link is None) == (self.eye is None):
            raise ValueError(f"camera {self.name!r}: give either eye and target (fixed) or link (on the arm)")
        if self.height <= 0 or self.width <= 0:
            raise ValueError(f"camera {self.name!r}: image size must be positive, got {self.height}x{self.width}")

    def intrinsics(self) -> np.ndarray:
        """K (3, 3) in pixels: square pixels, principal point at the image centre."""
        focal = (self.height / 2) / math.tan(math.radians(self.fov_y_deg) / 2)
        return np.array([[focal, 0, self.width / 2], [0, focal, self.height / 2], [0, 0, 1.0]])

    def projection(self) -> np.ndarray:
        """OpenGL projection (4, 4) matching `intrinsics()`."""
        f = 1 / math.tan(math.radians(self.fov_y_deg) / 2)
        aspect = self.width / self.height
        return np.array([[f / aspect, 0, 0, 0], [0, f, 0, 0],
                         [0, 0, (FAR_M + NEAR_M) / (NEAR_M - FAR_M), 2 * FAR_M * NEAR_M / (NEAR_M - FAR_M)],
                         [0, 0, -1, 0]])


UP = np.array([0.0, 0.0, 1.0])


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray = UP) -> np.ndarray:
    """Optical-frame rotation (3, 3), columns x right, y down, z forward, looking from eye at target."""
    forward = target - eye
    forward = forward / np.linalg.norm(forward)
    right = np.cross(forward, up)
    if np.linalg.norm(right) < 1e-9:  # looking straight along `up`
        right = np.cross(forward, np.array([0.0, 1.0, 0.0]))
    right = right / np.linalg.norm(right)
    down = np.cross(forward, right)
    return np.stack([right, down, forward], axis=1)


def view_matrix(position: np.ndarray, optical: np.ndarray) -> np.ndarray:
    """OpenGL view (4, 4) for a camera at `position` with optical rotation (3, 3) (x right, y down, z forward)."""
    gl = optical @ np.diag([1.0, -1.0, -1.0])  # OpenGL's camera looks along -z with y up
    view = np.eye(4)
    view[:3, :3] = gl.T
    view[:3, 3] = -gl.T @ position
    return view


def link_optical(link_rotation: np.ndarray) -> np.ndarray:
    """A camera link looks along its +x with +z up: its optical frame (x right, y down, z forward)."""
    x, _, z = link_rotation.T
    return np.stack([np.cross(x, z), -z, x], axis=1)


def camera_specs(names: tuple[str, ...] | list[str], height: int, width: int) -> list[CameraSpec]:
    """The named cameras of `CAMERAS` at one image size."""
    unknown = [name for name in names if name not in CAMERAS]
    if unknown:
        raise ValueError(f"unknown cameras {unknown}; expected some of {list(CAMERAS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"cameras must be distinct, got {list(names)}")
    return [CameraSpec(name, height, width, **CAMERAS[name]) for name in names]


class CameraRig:
    """The cameras in a world: where each is now and what it sees."""

    def __init__(self, world: World, robot: Robot, specs: list[CameraSpec]):
        self.world, self.robot = world, robot
        self.specs = {spec.name: spec for spec in specs}

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Position (3,) and optical rotation (3, 3) in the table frame (x right, y down, z forward)."""
        camera = self.specs[name]
        if camera.link is None:
            eye = np.array(camera.eye)
            return eye, look_at(eye, np.array(camera.target))
        position, rotation = self.robot.link_pose(camera.link)
        return position, link_optical(rotation)

    def render(self, names: list[str] | None = None, tiny: bool = False) -> dict[str, np.ndarray]:
        """{camera: (H, W, 3) uint8} for the named cameras (default: all); `tiny`: drawn with TinyRenderer."""
        images = {}
        for name in self.names if names is None else names:
            camera = self.specs[name]
            position, optical = self.pose(name)
            images[name] = self.world.render(view_matrix(position, optical), camera.projection(), camera.width,
                                             camera.height, tiny=tiny)
        return images
