"""What the policy node feeds its checkpoint, without ROS: which cameras it subscribes to and which of them the
ACT or the yaw reader takes (`camera_roles`), and an answered observation's parts made into the LeRobot
observation (`Observer`), so that act_node.nodes.policy_node stays ROS plumbing."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from act_node import so101
from act_node.checkpoints import checkpoint_layout, readable_checkpoint_cameras, trained_renderer
from act_node.config import task_kind
from act_node.description import tool_point
from act_node.observation import build_observation, requested_kind
from act_node.policy import OBS_ENV_STATE, OBS_IMAGES, ChunkPolicy, FeatureSpec, resized_frame
from act_node.table_frame import GRASP_LAYOUTS, YAW_LAYOUTS


@dataclass
class CameraRoles:
    cameras: list[str]  # subscribed to, camera/<name>/image_raw: the ACT's, then the yaw reader's
    act_cameras: list[str]  # the ones the ACT takes
    reader_cameras: list[str]  # the ones the yaw reader reads (target_tool_yaw, target_tool_yaw_grasp)
    reads_yaw: bool
    trained: dict[str, tuple[int, int]] | None  # the image sizes the checkpoint was trained on
    trained_renderer: str | None  # what drew its training images
    said: list[tuple[str, str]] = field(default_factory=list)  # (level, line) for the node's log, in order


def camera_roles(checkpoint: str, cameras: list[str]) -> CameraRoles:
    """The cameras a checkpoint takes of `cameras` (the parameter), and the yaw reader's. ValueError when the
    checkpoint reads the yaw from cameras that `cameras` lacks."""
    said: list[tuple[str, str]] = []
    # the sizes it was trained on, so that the check is about the camera set and the state; image sizes
    # are then checked per message
    trained = readable_checkpoint_cameras(checkpoint)
    # a checkpoint in a target_tool_yaw layout (and _grasp) reads the requested object's yaw from the yaw reader's
    # cameras (act_node.perception.yaw) at each run's first observation, whether or not it takes images itself: the node
    # subscribes to the checkpoint's cameras and the reader's, and feeds the ACT only its own
    reads_yaw = checkpoint_layout(checkpoint) in YAW_LAYOUTS
    reader_cameras: list[str] = []
    if trained == {} and cameras:  # a checkpoint that takes no images (joints and target only)
        if not reads_yaw:
            said.append(("info", f"the checkpoint takes no camera images: not subscribing to {cameras}"))
        act_cameras = []
    elif reads_yaw and trained:  # the cameras it does not take itself are the reader's only
        act_cameras = [c for c in cameras if c in trained]
    else:
        act_cameras = list(cameras)
    if reads_yaw:
        from act_node.perception.yaw import READER_CAMERAS

        missing = [c for c in READER_CAMERAS if c not in cameras]
        if missing:
            raise ValueError(f"checkpoint {checkpoint} reads the requested object's yaw from cameras "
                             f"{list(READER_CAMERAS)} (act_node.perception.yaw); parameter 'cameras' is "
                             f"{cameras}, without {missing}")
        reader_cameras = list(READER_CAMERAS)
        said.append(("info", f"the yaw reader reads cameras {reader_cameras} at each run's first "
                             f"observation" + ("" if act_cameras else "; the checkpoint takes no image")))
    # what drew the checkpoint's training images: the sim's episode/start says what draws them now
    renderer = None
    try:
        if act_cameras:
            renderer = trained_renderer(checkpoint)
        elif reads_yaw:  # the reader was trained on TinyRenderer's images
            renderer = "tiny"
    except ValueError as error:
        said.append(("error", f"not checking the sim's renderer: {error}"))
    subscribed = [*act_cameras, *(c for c in reader_cameras if c not in act_cameras)]
    return CameraRoles(subscribed, act_cameras, reader_cameras, reads_yaw, trained, renderer, said)


def load_policy(checkpoint: str, device: str, roles: CameraRoles, state_dim: int, threads: int = 0):
    """(the checkpoint as a ChunkPolicy, checked against the cameras and the state, and the yaw reader or None),
    with torch on `threads` threads (0: torch's default). On the thread that will run it."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    if not checkpoint:
        raise ValueError("parameter 'checkpoint' is empty: give a pretrained_model folder")
    trained = roles.trained or {}
    spec = FeatureSpec(cameras={c: trained.get(c, (0, 0)) for c in roles.act_cameras}, state_dim=state_dim)
    policy = ChunkPolicy.load(checkpoint, device=device, expect=spec)
    if roles.reads_yaw:
        from act_node.perception.yaw import YawReader

        return policy, YawReader.load()
    return policy, None


def renderer_mismatch(trained: str | None, drawn: str | None) -> str:
    """What to warn when the sim draws its cameras (episode/start's renderer) otherwise than the training images."""
    if not (trained and drawn and drawn != trained):
        return ""
    return (f"the sim draws its cameras with {drawn!r}, but this checkpoint was trained on images drawn with "
            f"{trained!r}: they light the scene differently (launch with renderer:=auto or renderer:={trained})")


def frame_size_line(camera: str, size: tuple[int, int], trained: tuple | None, for_reader: bool) -> str:
    """What size a camera's frames come at and what they become: for the checkpoint (trained: its size) and the
    yaw reader (`for_reader`)."""
    from act_node.perception.yaw import READER_IMAGE_SIZE

    sizes = []
    if trained is not None and tuple(trained) != tuple(size):
        sizes.append(f"to {trained[0]}x{trained[1]} for the checkpoint")
    if for_reader and READER_IMAGE_SIZE != size:
        sizes.append(f"to {READER_IMAGE_SIZE[0]}x{READER_IMAGE_SIZE[1]} for the yaw reader")
    said = f"resized {' and '.join(sizes)}" if sizes else "the size it was trained on"
    return f"camera {camera!r}: {size[0]}x{size[1]} frames, {said}"


class Observer:
    """An answered observation's parts (act_node.policy_schedule.Due) as the checkpoint's LeRobot observation:
    each image at its trained size (resized as LeRobot's processors do), with the target where the selector found
    it and the request (the task's kind), one-hot, when the checkpoint takes them. On the inference thread only.
    A checkpoint in the target_tool_yaw_grasp layout takes the grasp the expert's planner chooses, planned at the
    run's first observation (act_node.grasp) among the run's objects (`use_scene`: Due.scene, from
    scene/objects) or, without them, from the target and the yaw read; `said` holds the lines for the log."""

    def __init__(self, roles: CameraRoles, policy: ChunkPolicy, use_target: bool, yaw_reader=None,
                 use_scene: bool = True, fps: float = 30.0):
        self.roles, self.yaw_reader = roles, yaw_reader
        features = policy.config.input_features
        self.wants_target = OBS_ENV_STATE in features and use_target
        self.environment_layout = policy.environment_layout or "target"  # checked against the layouts at load
        self.wants_grasp = self.wants_target and self.environment_layout in GRASP_LAYOUTS
        self.wants_scene = self.wants_grasp and use_scene  # the schedule waits for the run's scene/objects
        self.fps = float(fps)
        self._run_grasp = None  # (run number, act_node.grasp.Grasp planned at its first observation)
        self.said: list[tuple[str, str]] = []
        # frames of any size are taken; the ACT gets each at its trained size, the yaw reader at its own (each
        # resizes as LeRobot's processors do: act_node.policy.resized_frame)
        self.image_sizes = {c: tuple(features[f"{OBS_IMAGES}.{c}"].shape[1:]) for c in roles.act_cameras}
        self._run_yaw: tuple[int, np.ndarray] | None = None  # (run number, the yaw read at its first observation)

    def check_task(self, task: str) -> None:
        """A checkpoint fed the request needs a task naming a kind it knows; ValueError says which it got."""
        if self.wants_target:
            task_kind(task)

    def observe(self, parts: dict, task: str, target: tuple | None, serial: int, scene: tuple | None = None) -> dict:
        """ValueError: a task that names no kind, a misshapen image for the yaw reader, a target that is not two
        finite numbers."""
        about = ()
        if self.wants_target:  # target_tool: and the tool's place, by forward kinematics from these joints
            tool = tool_point(parts["joints"]) if self.environment_layout != "target" else None
            yaw = self._yaw(serial, parts, task)
            grasp = self._grasp(serial, parts, task, target[1], yaw, scene)
            about = (target[1], requested_kind(task), self.environment_layout, tool, yaw, grasp)
        images = {c: resized_frame(parts[c], self.image_sizes[c]) for c in self.roles.act_cameras}
        return build_observation(parts["joints"], images, *about)

    def _grasp(self, serial: int, parts: dict, task: str, target_xy, yaw, scene) -> np.ndarray | None:
        """target_tool_yaw_grasp: the grasp planned at the first answered observation of run number `serial` from
        its joints, the target, and the run's objects (`scene`, (stamp, [(kind, x, y, yaw)]), or None: the target
        alone, lying as the yaw reader read it), held through the run; None for the other layouts."""
        if not self.wants_grasp:
            return None
        if self._run_grasp is None or self._run_grasp[0] != serial:
            from act_node.grasp import planned_grasp

            objects = None if scene is None else scene[1]
            start = so101.to_lerobot(np.asarray(parts["joints"], dtype=np.float64)).astype(np.float32)
            grasp = planned_grasp(start, target_xy, requested_kind(task), objects, self.fps, yaw)
            self._run_grasp = (serial, grasp)
            if grasp.source == "none":
                self.said.append(("warn", f"no grasp planned for this run ({grasp.why}): the checkpoint is given "
                                          f"zeros for it"))
            else:
                roll = np.degrees(np.arctan2(grasp.numbers[1], grasp.numbers[0]))
                self.said.append(("info", f"grasp planned from the {grasp.source}: wrist roll {roll:.0f} deg at the "
                                          f"close, tool {100 * grasp.numbers[2]:+.1f}, {100 * grasp.numbers[3]:+.1f} "
                                          f"cm off the target"))
        return self._run_grasp[1].numbers

    def _yaw(self, serial: int, parts: dict, task: str) -> np.ndarray | None:
        """target_tool_yaw: the yaw the reader read at the first answered observation of run number `serial`
        (read now if this is it), as the env reads it at reset, and held through the run (a clock jump included);
        None for the other layouts. ValueError from the reader (a misshapen image, a task that names no kind)."""
        if not self.roles.reads_yaw:
            return None
        if self._run_yaw is None or self._run_yaw[0] != serial:
            images = {c: parts[c] for c in self.roles.reader_cameras}
            self._run_yaw = (serial, self.yaw_reader.read(images, requested_kind(task)))
        return self._run_yaw[1]
