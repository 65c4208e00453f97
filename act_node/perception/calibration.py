"""Where a camera stands over the table: its pose in the `table` frame from one image, solved with OpenCV's PnP.

A user prints a chessboard, lays it flat on the table at a place they measure (the board's first inner corner at
`origin` (x, y) metres in `table`, its rows along `yaw` degrees from the table's x axis), and takes one image with
the camera; `calibrate_board` finds the inner corners (cv2.findChessboardCorners, refined to sub-pixel) and solves
the camera's pose from them with the intrinsics (camera_info's K). Without a board, four or more table points
clicked in the image do (`calibrate_points`). The result is a CameraCalibration (act_node.perception.scene), saved
as JSON, that the scene reader node reads (camera_calibration:=FILE).

In the sim `sim_board_image` draws such a board on the table and renders the front camera, so the solve can be
checked against the camera's known pose (`act-sim calibrate --sim`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from act_node.perception.scene import CameraCalibration


@dataclass(frozen=True)
class Board:
    """A chessboard on the table: inner corners (cols x rows), square side, its first inner corner's place and
    the direction of its rows (degrees from the table's x axis)."""

    cols: int = 7
    rows: int = 4
    square_m: float = 0.03
    origin: tuple[float, float] = (0.41, 0.14)
    yaw_deg: float = 0.0

    def __post_init__(self):
        if self.cols < 3 or self.rows < 3 or (self.cols + self.rows) % 2 == 0:
            raise ValueError(f"board needs at least 3x3 inner corners, one count odd and one even (so that the "
                             f"board turned half round looks different), got {self.cols}x{self.rows}")
        if not self.square_m > 0:
            raise ValueError(f"board square must be > 0 m, got {self.square_m}")

    def axes(self) -> tuple[np.ndarray, np.ndarray]:
        """Unit vectors on the table (2,): along the board's rows, and across them."""
        yaw = math.radians(self.yaw_deg)
        return np.array([math.cos(yaw), math.sin(yaw)]), np.array([-math.sin(yaw), math.cos(yaw)])

    def corners(self) -> np.ndarray:
        """The inner corners (cols * rows, 3) in the table frame, in OpenCV's order (along a row first)."""
        along, across = self.axes()
        points = [np.array(self.origin) + self.square_m * (c * along + r * across)
                  for r in range(self.rows) for c in range(self.cols)]
        return np.c_[np.array(points), np.zeros(len(points))]

    @classmethod
    def parse(cls, text: str, square_m: float, origin: str, yaw_deg: float) -> Board:
        """'7x5', 0.03, '0.41,0.14', 0 -> a Board; ValueError naming the malformed part."""
        try:
            cols, rows = (int(v) for v in text.lower().split("x"))
        except ValueError:
            raise ValueError(f"board {text!r} must be COLSxROWS inner corners, e.g. 7x5") from None
        try:
            x, y = (float(v) for v in origin.split(","))
        except ValueError:
            raise ValueError(f"board origin {origin!r} must be X,Y metres in the table frame") from None
        return cls(cols, rows, square_m, (x, y), yaw_deg)


def pinhole(height: int, width: int, horizontal_fov_deg: float) -> np.ndarray:
    """K of a pinhole camera with square pixels and the principal point at the centre (what the camera node puts
    in camera_info without a calibration)."""
    focal = (width / 2) / math.tan(math.radians(horizontal_fov_deg) / 2)
    return np.array([[focal, 0, width / 2], [0, focal, height / 2], [0, 0, 1.0]])


def find_corners(image: np.ndarray, board: Board) -> np.ndarray:
    """The board's inner corners in an RGB image (N, 2) pixels (continuous: pixel i spans [i, i + 1)), in
    OpenCV's order; ValueError when the board is not found."""
    import cv2

    grey = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
    found, corners = cv2.findChessboardCorners(grey, (board.cols, board.rows),
                                               flags=cv2.CALIB_CB_ADAPTIVE_THRESH | cv2.CALIB_CB_NORMALIZE_IMAGE)
    if not found:
        raise ValueError(f"no {board.cols}x{board.rows} chessboard found in the {image.shape[1]}x{image.shape[0]} "
                         f"image (all inner corners must be visible, the board flat and lit)")
    corners = cv2.cornerSubPix(grey, corners, (5, 5), (-1, -1),
                               (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 50, 1e-3))
    return corners.reshape(-1, 2) + 0.5  # OpenCV's pixel centres are integers; ours are at i + 0.5


def calibrate_points(pixels: np.ndarray, points: np.ndarray, intrinsics: np.ndarray,
                     size: tuple[int, int]) -> tuple[CameraCalibration, float]:
    """The camera's pose from table points (N, 3) seen at pixels (N, 2), N >= 4: (calibration, RMS reprojection
    error in pixels)."""
    import cv2

    pixels, points = np.asarray(pixels, np.float64).reshape(-1, 2), np.asarray(points, np.float64).reshape(-1, 3)
    if len(pixels) != len(points) or len(points) < 4:
        raise ValueError(f"PnP needs 4 or more table points and as many pixels, got {len(points)} and {len(pixels)}")
    flags = cv2.SOLVEPNP_IPPE if np.allclose(points[:, 2], points[0, 2]) else cv2.SOLVEPNP_ITERATIVE
    ok, rvec, tvec = cv2.solvePnP(points, pixels, intrinsics, None, flags=flags)
    if not ok:
        raise ValueError("OpenCV's solvePnP found no pose for these points")
    rvec, tvec = cv2.solvePnPRefineLM(points, pixels, intrinsics, None, rvec, tvec)
    table_to_camera, _ = cv2.Rodrigues(rvec)  # x_cam = R x_table + t
    rotation = table_to_camera.T  # the optical frame's axes in the table frame
    position = -rotation @ tvec.ravel()
    calibration = CameraCalibration(intrinsics, position, rotation, size)
    error = float(np.sqrt(np.mean(np.sum((calibration.to_image(points) - pixels) ** 2, axis=1))))
    return calibration, error


def calibrate_board(image: np.ndarray, intrinsics: np.ndarray, board: Board) -> tuple[CameraCalibration, float]:
    """The camera's pose from one image of `board` lying on the table: (calibration, RMS reprojection px)."""
    pixels = find_corners(image, board)
    # OpenCV lists the corners row by row from any of the board's ends: of the four orders, a mirrored one puts the
    # camera under the table, and the board turned half round swaps its colours (one count odd), so the order is
    # the one with the camera above the table and a dark square outside the first corner
    grid = pixels.reshape(board.rows, board.cols, 2)
    best = None
    for order in (grid, grid[::-1], grid[:, ::-1], grid[::-1, ::-1]):
        calibration, error = calibrate_points(order.reshape(-1, 2), board.corners(), intrinsics, image.shape[:2])
        if calibration.position[2] <= 0:
            continue
        contrast = _corner_square_contrast(image, calibration, board)
        if best is None or contrast > best[0]:
            best = (contrast, calibration, error)
    if best is None or best[0] <= 0:
        raise ValueError("the chessboard's corners were found but no order of them puts the camera above the table "
                         "with the dark square outside the first corner: check --board, --board-origin and the "
                         "board's colours")
    return best[1], best[2]


def _corner_square_contrast(image: np.ndarray, calibration: CameraCalibration, board: Board) -> float:
    """How much lighter the square beside the first inner corner along the row is than the (black) square
    diagonally outside it, as `calibration` projects them."""
    along, across = board.axes()
    centres = [np.array(board.origin) + board.square_m * (di * along + dj * across) for di, dj in ((-0.5, -0.5),
                                                                                                   (0.5, -0.5))]
    pixels = calibration.to_image(np.c_[np.array(centres), np.zeros(2)])
    grey = np.asarray(image, dtype=np.float64).mean(axis=2)
    values = []
    for u, v in pixels:
        if not (np.isfinite(u) and np.isfinite(v) and 0 <= u < grey.shape[1] and 0 <= v < grey.shape[0]):
            return -np.inf
        values.append(grey[int(v), int(u)])
    return float(values[1] - values[0])


def pose_error(a: CameraCalibration, b: CameraCalibration) -> tuple[float, float]:
    """(position difference in metres, rotation difference in degrees) between two calibrations."""
    relative = a.rotation.T @ b.rotation
    angle = math.degrees(math.acos(float(np.clip((np.trace(relative) - 1) / 2, -1.0, 1.0))))
    return float(np.linalg.norm(a.position - b.position)), angle


def sim_board_image(board: Board, height: int = 480, width: int = 640, camera: str = "front") -> np.ndarray:
    """The sim's table with `board` lying on it (black squares on a white sheet, drawn only: nothing collides),
    as `camera` sees it, (height, width, 3) uint8."""
    import pybullet

    from act_node.tabletop.cameras import CAMERAS, CameraSpec, look_at, view_matrix
    from act_node.tabletop.world import World

    world = World(renderer="tiny")
    try:
        world.add_table()
        client = world.client
        along, across = board.axes()
        orientation = client.getQuaternionFromEuler([0, 0, math.radians(board.yaw_deg)])
        # squares (i, j), i along a row from -1 to cols-1: square (i, j)'s near corner is inner corner (i, j)
        origin = np.array(board.origin)
        centre = origin + board.square_m * ((board.cols - 1) / 2 * along + (board.rows - 1) / 2 * across)
        half = [board.square_m * (board.cols + 3) / 2, board.square_m * (board.rows + 3) / 2, 0.0005]
        sheet = client.createVisualShape(pybullet.GEOM_BOX, halfExtents=half, rgbaColor=[1, 1, 1, 1])
        client.createMultiBody(0, -1, sheet, [*centre, 0.0005], orientation)
        square = client.createVisualShape(pybullet.GEOM_BOX, halfExtents=[board.square_m / 2] * 2 + [0.0005],
                                          rgbaColor=[0, 0, 0, 1])
        for i in range(-1, board.cols):
            for j in range(-1, board.rows):
                if (i + j) % 2:
                    continue
                middle = origin + board.square_m * ((i + 0.5) * along + (j + 0.5) * across)
                client.createMultiBody(0, -1, square, [*middle, 0.0012], orientation)
        spec = CameraSpec(camera, height, width, **CAMERAS[camera])
        eye = np.array(spec.eye)
        return world.render(view_matrix(eye, look_at(eye, np.array(spec.target))), spec.projection(), width, height,
                            tiny=True)
    finally:
        world.close()
