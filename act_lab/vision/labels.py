"""What each camera image shows, from what the simulator knows: the labels the vision encoder is pretrained on.

Per image and per kind of object (the eight of act_node.tabletop.objects, each at most once in a scene), and
independent of the request (the encoder never sees it):
  present      the kind's centre (its body origin raised half its height) projects inside the image, in front
               of the camera, and at least MIN_VISIBLE_PX of its pixels are seen (segmentation: not occluded)
  centre_px    that centre in the image, (u right, v down) pixels, continuous (pixel i spans [i, i + 1))
  yaw          (cos k*phi, sin k*phi): phi is the angle of the object's long axis as the image shows it (from
               +u toward +v), k its symmetry (the kind's grasp_turns: 2 for a pen, 4 for the cube); valid only
               for kinds with k > 0 whose axis is not foreshortened below YAW_MIN_FORESHORTENING
and for a camera on the arm (the wrist), in the gripper's frame (the `tcp` link: x along the jaws toward their
tips, y across them toward the moving jaw, z the jaws' depth; the tcp lies on the fixed jaw's inner face):
  offset_m     the kind's grasp point (its origin raised to its grasp height) from the tcp, metres; valid where
               the kind is seen in the wrist image (visible_px >= MIN_VISIBLE_PX)
  between      that grasp point lies in the space the jaws enclose now (their opening read from the gripper
               joint), whether seen or not

    views = render_views(table)                          # {camera: (rgb (H, W, 3) uint8, body ids (H, W))}
    labels = image_labels(table, "wrist", views["wrist"][1])

The images come from the same call as CameraRig.render, with pybullet's segmentation mask kept
(tests/test_vision.py checks the pixels are the same).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from act_node import so101
from act_node.tabletop.cameras import view_matrix
from act_node.tabletop.objects import KINDS
from act_node.tabletop.table import TableTop

KIND_NAMES: tuple[str, ...] = tuple(KINDS)
YAW_TURNS = np.array([KINDS[name].grasp_turns for name in KIND_NAMES])  # (8,) 0: round, no yaw label
MIN_VISIBLE_PX = 3  # at 96x128 a pen across the far side of the table covers about 10
YAW_MIN_FORESHORTENING = 0.35  # the axis's image length over its length seen face-on: below, phi is noise
AXIS_STEP_M = 0.01  # the axis is measured over 1 cm from the centre
# The jaws in the tcp frame (sim/so101.urdf): the moving jaw pivots 7 cm behind the tcp (gripper joint at
# gripper_body x 0.005, tcp at 0.075), the fixed jaw runs from gripper_body x 0.028 to 0.100, 22 mm deep.
PIVOT_BEHIND_TCP_M = 0.07
JAW_ALONG_M = (-0.047, 0.025)
JAW_HALF_DEPTH_M = 0.011 + 0.005  # half the jaw's depth and a grasp point's tolerance


@dataclass
class ImageLabels:
    """One image's labels, one row per kind in KIND_NAMES order."""

    present: np.ndarray  # (8,) bool
    centre_px: np.ndarray  # (8, 2) float32 (u, v); 0 where not present
    yaw: np.ndarray  # (8, 2) float32 (cos k phi, sin k phi); 0 where not valid
    yaw_valid: np.ndarray  # (8,) bool
    visible_px: np.ndarray  # (8,) int32 pixels of the kind in the image
    offset_m: np.ndarray  # (8, 3) float32 grasp point from the tcp, gripper frame; 0 for a fixed camera
    offset_valid: np.ndarray  # (8,) bool
    between: np.ndarray  # (8,) bool

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def project(points: np.ndarray, position: np.ndarray, optical: np.ndarray,
            intrinsics: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Table-frame points (N, 3) -> pixels (N, 2) (u, v) and depth along the optical axis (N,) metres, for a
    camera at `position` (3,) with optical rotation (3, 3) (columns x right, y down, z forward)."""
    camera = (np.asarray(points, dtype=np.float64) - position) @ optical  # (N, 3) in the optical frame
    depth = camera[:, 2]
    safe = np.where(np.abs(depth) < 1e-9, 1e-9, depth)
    pixels = (camera @ intrinsics.T)[:, :2] / safe[:, None]  # (N, 2)
    return pixels, depth


def render_views(table: TableTop, names: list[str] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{camera: (rgb (H, W, 3) uint8, body id per pixel (H, W) int32, -1 for none)}: CameraRig.render's image
    with pybullet's segmentation mask, from one call."""
    world, rig = table.world, table.rig
    if world.client.name != "tiny":
        raise ValueError(f"the encoder's images are drawn with renderer 'tiny' (TinyRenderer), this table-top "
                         f"draws with {world.client.name!r}")
    views = {}
    for name in rig.names if names is None else names:
        spec = rig.specs[name]
        position, optical = rig.pose(name)
        _, _, rgba, _, segmentation = world.client.getCameraImage(
            spec.width, spec.height, viewMatrix=view_matrix(position, optical).T.flatten().tolist(),
            projectionMatrix=spec.projection().T.flatten().tolist(), renderer=world.client.renderer, shadow=0)
        rgb = np.asarray(rgba, dtype=np.uint8).reshape(spec.height, spec.width, 4)[..., :3]
        ids = np.asarray(segmentation, dtype=np.int64).reshape(spec.height, spec.width)
        # with several links a pixel holds body + (link + 1) << 24; the body id is the low 24 bits
        views[name] = (rgb, np.where(ids < 0, -1, ids & ((1 << 24) - 1)).astype(np.int32))
    return views


def image_labels(table: TableTop, camera: str, segmentation: np.ndarray) -> ImageLabels:
    """The labels of `camera`'s image now, given its segmentation (H, W) body ids from render_views."""
    if table.task.scene is None:
        raise RuntimeError("no scene: reset the table-top before labelling its images")
    spec = table.rig.specs[camera]
    if segmentation.shape != (spec.height, spec.width):
        raise ValueError(f"segmentation of camera {camera!r} has shape {segmentation.shape}, expected "
                         f"({spec.height}, {spec.width})")
    kinds = len(KIND_NAMES)
    labels = ImageLabels(np.zeros(kinds, bool), np.zeros((kinds, 2), np.float32), np.zeros((kinds, 2), np.float32),
                         np.zeros(kinds, bool), np.zeros(kinds, np.int32), np.zeros((kinds, 3), np.float32),
                         np.zeros(kinds, bool), np.zeros(kinds, bool))
    placed = table.task.scene.objects
    states = table.task.object_states()  # in the scene's order
    rows = np.array([KIND_NAMES.index(state.kind) for state in states])
    counts = np.bincount(segmentation[segmentation >= 0].ravel(), minlength=max(o.body for o in placed) + 1)
    labels.visible_px[rows] = [counts[o.body] if o.body < len(counts) else 0 for o in placed]

    position, optical = table.rig.pose(camera)
    intrinsics = spec.intrinsics()
    centres = np.array([s.position + np.array([0.0, 0.0, s.height_m / 2]) for s in states])  # (objects, 3)
    axes = np.array([[math.cos(s.yaw), math.sin(s.yaw), 0.0] for s in states])  # (objects, 3)
    pixels, depth = project(centres, position, optical, intrinsics)
    tips, _ = project(centres + AXIS_STEP_M * axes, position, optical, intrinsics)
    inside = (depth > 0.01) & (pixels[:, 0] >= 0) & (pixels[:, 0] < spec.width) & (pixels[:, 1] >= 0) & \
        (pixels[:, 1] < spec.height)
    present = inside & (labels.visible_px[rows] >= MIN_VISIBLE_PX)
    labels.present[rows] = present
    labels.centre_px[rows] = np.where(present[:, None], pixels, 0.0)

    along = tips - pixels  # (objects, 2) the axis in the image
    face_on = intrinsics[0, 0] * AXIS_STEP_M / np.maximum(depth, 1e-6)
    turns = YAW_TURNS[rows]
    phi = np.arctan2(along[:, 1], along[:, 0])
    yaw_valid = present & (turns > 0) & (np.hypot(*along.T) >= YAW_MIN_FORESHORTENING * face_on)
    labels.yaw_valid[rows] = yaw_valid
    labels.yaw[rows] = np.where(yaw_valid[:, None], np.stack([np.cos(turns * phi), np.sin(turns * phi)], 1), 0.0)

    if spec.link is not None:  # a camera on the arm: where the objects are from the jaws
        offsets = grasp_offsets(table)  # (objects, 3)
        labels.offset_m[rows] = offsets
        labels.offset_valid[rows] = labels.visible_px[rows] >= MIN_VISIBLE_PX
        labels.between[rows] = between_jaws(offsets, float(table.robot.joint_positions()[so101.GRIPPER]))
    return labels


def grasp_offsets(table: TableTop) -> np.ndarray:
    """Each object's grasp point (origin raised to its kind's grasp height) from the tcp, in the tcp's frame:
    (objects, 3) metres, in the scene's order."""
    tcp, rotation = table.robot.link_pose("tcp")
    grasp = np.array([s.position + np.array([0.0, 0.0, KINDS[s.kind].grasp_height_m])
                      for s in table.task.object_states()])
    return (grasp - tcp) @ rotation


def between_jaws(offsets: np.ndarray, gripper_rad: float) -> np.ndarray:
    """Whether points (N, 3) in the tcp frame lie in the space the jaws enclose at this gripper angle (radians):
    along the jaws, on the moving jaw's side of the fixed jaw's face, short of the moving jaw's inner face."""
    offsets = np.asarray(offsets, dtype=np.float64).reshape(-1, 3)
    along, across, depth = offsets.T
    opening = np.maximum((along + PIVOT_BEHIND_TCP_M) * math.tan(max(gripper_rad, 0.0)), 0.0)
    return (along >= JAW_ALONG_M[0]) & (along <= JAW_ALONG_M[1]) & (across >= 0.0) & (across <= opening) & \
        (np.abs(depth) <= JAW_HALF_DEPTH_M)
