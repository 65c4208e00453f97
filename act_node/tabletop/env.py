"""`ActNode/PickObject-v0`: pick up the requested object with an SO-101 on a 1 m x 1 m table.

Observation (LeRobot's env convention):
  pixels             {camera: (H, W, 3) uint8}
  agent_pos          (6,) float32 joint positions, degrees and gripper 0-100 (LeRobot SO-101 units)
  environment_state  (2,) float32 the target (x, y) in metres, table frame, from the Selector (or the truth)
Action: (6,) joint position targets in the same units as agent_pos, clipped to the joint ranges.
Success: the requested object at least 5 cm above where it stood, held by both jaws.
Reward (dense, in [0, 1]): 0.3 for closing in on the object, 0.2 for holding it, 0.5 for lifting it.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from act_node import so101
from act_node.selector import Selector
from act_node.tabletop.cameras import CameraSpec, link_optical, look_at, view_matrix
from act_node.tabletop.scene import Scene, sample_scene
from act_node.tabletop.world import PHYSICS_HZ, TABLE_SIZE_M, World

FPS = 30
MAX_STEPS = 300  # 10 s at 30 fps
OBSERVED_MARGIN = 10.0  # degrees (gripper: 0-100 units) past the joint ranges that observations may show
LIFT_SUCCESS_M = 0.05
# The pose each episode starts from (degrees, gripper 0-100): tool nearly down, 15 cm above the table.
HOME_LEROBOT = np.array([0.0, -28.0, 12.0, 85.0, 0.0, 20.0])
HOME_NOISE_DEG = 3.0


def camera_specs(names: tuple[str, ...], height: int, width: int) -> list[CameraSpec]:
    """The named cameras at one image size: `front` (across the table, looking at the arm's reach),
    `top` (straight down over the reach) and `wrist` (on the gripper, looking along the jaws)."""
    known = {
        "front": dict(eye=(0.5, 0.52, 0.34), target=(0.5, 0.2, 0.0), fov_y_deg=50.0),
        "top": dict(eye=(0.5, 0.2, 0.75), target=(0.5, 0.2, 0.0), fov_y_deg=40.0),
        "wrist": dict(link="wrist_camera", fov_y_deg=70.0),
    }
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown cameras {unknown}; expected some of {list(known)}")
    return [CameraSpec(name, height, width, **known[name]) for name in names]


class PickObjectEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": FPS}

    def __init__(self, objects: int = 4, cameras: tuple[str, ...] = ("front", "wrist"),
                 image_size: tuple[int, int] = (240, 320), fps: int = FPS, max_steps: int = MAX_STEPS,
                 target_source: str = "selector", request: str | None = None, render_mode: str = "rgb_array",
                 selector: Selector | None = None):
        if target_source not in ("selector", "truth"):
            raise ValueError(f"target_source must be 'selector' or 'truth', got {target_source!r}")
        if render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be 'rgb_array', got {render_mode!r}")
        if PHYSICS_HZ % fps:
            raise ValueError(f"fps {fps} must divide the physics rate")
        self.object_count = objects
        self.cameras = camera_specs(tuple(cameras), *image_size)
        self.fps = fps
        self.max_steps = max_steps
        self.target_source = target_source
        self.fixed_request = request
        self.render_mode = render_mode
        self.selector = selector if selector is not None or target_source == "truth" else Selector.load()
        self.world = World()
        self.substeps = self.world.physics_hz // fps
        self.observation_space = spaces.Dict({
            "pixels": spaces.Dict({c.name: spaces.Box(0, 255, (c.height, c.width, 3), np.uint8) for c in self.cameras}),
            # measured joints can pass a limit by a hair (soft joint limits): the box allows a margin
            "agent_pos": spaces.Box((so101.LOWER_LEROBOT - OBSERVED_MARGIN).astype(np.float32),
                                    (so101.UPPER_LEROBOT + OBSERVED_MARGIN).astype(np.float32), dtype=np.float32),
            "environment_state": spaces.Box(0.0, TABLE_SIZE_M, (2,), np.float32),
        })
        self.action_space = spaces.Box(so101.LOWER_LEROBOT.astype(np.float32), so101.UPPER_LEROBOT.astype(np.float32),
                                       dtype=np.float32)
        self.scene: Scene | None = None
        self.steps = 0
        self.clipped_total = 0
        self._last_pixels: dict[str, np.ndarray] = {}

    # --- gymnasium ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        self.scene = sample_scene(self.np_random, int(options.get("objects", self.object_count)),
                                  request=options.get("request", self.fixed_request))
        home = HOME_LEROBOT + np.append(self.np_random.uniform(-HOME_NOISE_DEG, HOME_NOISE_DEG, 5), 0.0)
        self.world.build(self.scene.objects, so101.from_lerobot(home))
        self.world.step(self.substeps)  # let the objects settle on the table
        self.start_heights = {o.kind.name: self.world.object_pose(o)[0][2] for o in self.scene.objects}
        self.target_xy, self.target_error_m = self._choose_target()
        self.steps, self.clipped_total = 0, 0
        return self._observation(), self._info(success=False, clipped=0)

    def step(self, action):
        if self.scene is None:
            raise RuntimeError("call reset() before step()")
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (6,):
            raise ValueError(f"action must have shape (6,) for joints {so101.JOINT_NAMES}, got {action.shape}")
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action has NaN or inf at joints "
                             f"{[n for n, v in zip(so101.JOINT_NAMES, action) if not math.isfinite(v)]}")
        target = np.clip(action, so101.LOWER_LEROBOT, so101.UPPER_LEROBOT)
        clipped = int(np.count_nonzero(target != action))
        self.clipped_total += clipped
        self.world.command(so101.from_lerobot(target))
        self.world.step(self.substeps)
        self.steps += 1
        success = self.is_success()
        observation = self._observation()
        truncated = self.steps >= self.max_steps and not success
        return observation, self.reward(success), success, truncated, self._info(success, clipped)

    def render(self) -> np.ndarray:
        """All cameras of the latest observation side by side (H, sum of W, 3), uint8."""
        if not self._last_pixels:
            raise RuntimeError("no camera image yet: call reset() first, with at least one camera")
        height = max(image.shape[0] for image in self._last_pixels.values())
        frames = [np.pad(image, ((0, height - image.shape[0]), (0, 0), (0, 0))) for image in self._last_pixels.values()]
        return np.concatenate(frames, axis=1)

    def close(self) -> None:
        self.world.close()

    # --- the task ---------------------------------------------------------------------------------------
    @property
    def task(self) -> str:
        return self.scene.task if self.scene else ""

    @property
    def task_description(self) -> str:
        """LeRobot's rollout reads the language task under this name."""
        return self.task

    @property
    def _max_episode_steps(self) -> int:
        """LeRobot's rollout reads the step limit under this name (no TimeLimit wrapper here)."""
        return self.max_steps

    def object_tokens(self) -> list[tuple[str, float, float]]:
        """The scene as the Selector sees it: (kind, x, y) per object, metres, table frame."""
        return [(o.kind.name, float(o.xy[0]), float(o.xy[1])) for o in self.scene.objects]

    def _choose_target(self) -> tuple[np.ndarray, float]:
        truth = self.scene.target.xy
        if self.target_source == "truth":
            return truth.copy(), 0.0
        choice = self.selector.select(self.object_tokens(), self.scene.request)
        if not choice.found:  # the kind is on the table by construction: count it and fall back
            return truth.copy(), math.inf
        selected = np.array(choice.target_xy)
        return selected, float(np.hypot(*(selected - truth)))

    def lift_m(self) -> float:
        target = self.scene.target
        return float(self.world.object_pose(target)[0][2] - self.start_heights[target.kind.name])

    def held(self) -> bool:
        target = self.scene.target
        return self.world.touches(target, "moving_jaw") and self.world.touches(target, "gripper_body")

    def is_success(self) -> bool:
        return self.lift_m() >= LIFT_SUCCESS_M and self.held()

    def reward(self, success: bool) -> float:
        if success:
            return 1.0
        tcp, _ = self.world.link_pose("tcp")
        position, _ = self.world.object_pose(self.scene.target)
        grasp = np.array([position[0], position[1], self.scene.target.kind.grasp_height_m])
        reach = 1.0 - math.tanh(10.0 * float(np.linalg.norm(tcp - grasp)))
        held = self.held()
        lift = min(max(self.lift_m(), 0.0) / LIFT_SUCCESS_M, 1.0) if held else 0.0
        return 0.3 * reach + 0.2 * held + 0.5 * lift

    # --- observing --------------------------------------------------------------------------------------
    def camera_pose(self, camera: CameraSpec) -> tuple[np.ndarray, np.ndarray]:
        """Position (3,) and optical rotation (3, 3) in the table frame (x right, y down, z forward)."""
        if camera.link is None:
            eye = np.array(camera.eye)
            return eye, look_at(eye, np.array(camera.target))
        position, rotation = self.world.link_pose(camera.link)
        return position, link_optical(rotation)

    def render_camera(self, camera: CameraSpec) -> np.ndarray:
        position, optical = self.camera_pose(camera)
        return self.world.render(view_matrix(position, optical), camera.projection(), camera.width, camera.height)

    def _observation(self) -> dict:
        self._last_pixels = {camera.name: self.render_camera(camera) for camera in self.cameras}
        return {
            "pixels": dict(self._last_pixels),
            "agent_pos": so101.to_lerobot(self.world.joint_positions()).astype(np.float32),
            "environment_state": self.target_xy.astype(np.float32),
        }

    def _info(self, success: bool, clipped: int) -> dict:
        return {"is_success": bool(success), "task": self.task, "clipped_joints": clipped,
                "clipped_total": self.clipped_total, "target_error_m": self.target_error_m, "steps": self.steps}
