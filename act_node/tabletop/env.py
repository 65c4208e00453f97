"""`ActNode/PickObject-v0`: pick up the requested object with an SO-101 on a 1 m x 1 m table.

A gymnasium env over act_node.tabletop.table.TableTop (SI units), in LeRobot's convention at its edge:
Observation:
  pixels             {camera: (H, W, 3) uint8}
  agent_pos          (6,) float32 joint positions, degrees and gripper 0-100 (LeRobot SO-101 units)
  environment_state  (10,) float32 the target (x, y) in metres, table frame, from the Selector (or the truth),
                     then the requested kind one-hot over the eight kinds (act_node.observation); with
                     environment_layout "target_tool" (13,): then the tool centre point minus the target in x, y
                     and the tool's height, by the URDF's forward kinematics from the joints; with
                     "target_tool_yaw" (15,): then the requested object's (cos k*yaw, sin k*yaw), read at reset
                     by the yaw reader (act_node.perception.yaw) from the front and wrist cameras drawn at 96x128 with
                     TinyRenderer (its own draw, whatever the env's cameras are); with "target_tool_yaw_grasp"
                     (19,): then the grasp the expert's planner chooses at reset (act_node.grasp), among
                     the objects the Selector read (scene "cameras": the scene reader's; "sim": the simulator's)
Action: (6,) joint position targets in the same units as agent_pos, clamped to the joint ranges (counted).
Success and reward: act_node.tabletop.task.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from act_node import so101
from act_node.attention.selector import Selector
from act_node.config import DEFAULT_CAMERAS, EPISODE_STEPS, FPS, SCENE_SOURCES, SIM_IMAGE_SIZE, TARGET_SOURCES
from act_node.observation import TOOL_NAMES, YAW_NAMES, build_observation, environment_state_names
from act_node.table_frame import (
    GRASP_LAYOUTS,
    GRASP_NAMES,
    TABLE_SIZE_M,
    YAW_LAYOUTS,
    YAW_READER_CAMERAS,
    YAW_READER_IMAGE_SIZE,
)
from act_node.tabletop.cameras import CameraRig, camera_specs
from act_node.tabletop.scene import Scene
from act_node.tabletop.table import TableTop
from act_node.tabletop.task import TargetChoice
from act_node.tabletop.video import side_by_side

OBSERVED_MARGIN = 10.0  # degrees (gripper: 0-100 units) past the joint ranges that observations may show


class PickObjectEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": FPS}

    def __init__(self, objects: int = 4, cameras: tuple[str, ...] = DEFAULT_CAMERAS,
                 image_size: tuple[int, int] = SIM_IMAGE_SIZE, fps: int = FPS, max_steps: int = EPISODE_STEPS,
                 target_source: str = "selector", request: str | None = None, render_mode: str = "rgb_array",
                 selector: Selector | None = None, renderer: str = "tiny", environment_layout: str = "target",
                 yaw_reader=None, scene: str = "sim", scene_reader=None, grasp_planner=None):
        if scene not in SCENE_SOURCES:
            raise ValueError(f"scene must be one of {SCENE_SOURCES}, got {scene!r}")
        if scene == "cameras" and (scene_reader is None or target_source == "truth"):
            raise ValueError("scene 'cameras' reads the objects from the front camera: give scene_reader= "
                             "(act_node.perception.scene.SceneReader.load(), or build the env with "
                             "act_node.envs.make_env, which does) and target_source 'selector'")
        if target_source not in TARGET_SOURCES:
            raise ValueError(f"target_source must be one of {TARGET_SOURCES}, got {target_source!r}")
        if render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be 'rgb_array', got {render_mode!r}")
        names = environment_state_names(environment_layout)  # ValueError naming the layouts for an unknown one
        if environment_layout in YAW_LAYOUTS and yaw_reader is None:  # before any pybullet client exists
            raise ValueError(f"environment_layout {environment_layout!r} reads the requested object's yaw from the "
                             "cameras: give yaw_reader= (act_node.perception.yaw.YawReader.load(), or build the env "
                             "with act_node.envs.make_env, which does)")
        if environment_layout in GRASP_LAYOUTS and grasp_planner is None:
            raise ValueError(f"environment_layout {environment_layout!r} takes the grasp the expert's planner chooses: "
                             "give grasp_planner= (act_node.grasp.planned_grasp, or build the env with "
                             "act_node.envs.make_env, which does)")
        self.grasp_planner = grasp_planner
        self.environment_layout = environment_layout
        self.object_count = objects
        self.table = TableTop(camera_specs(tuple(cameras), *image_size), fps, renderer)
        self.cameras = list(self.table.rig.specs.values())
        self.fps = fps
        self.max_steps = max_steps
        self.target_source = target_source
        self.fixed_request = request
        self.render_mode = render_mode
        self.selector = None if target_source == "truth" else (selector or Selector.load())
        self.yaw_reader, self.yaw_rig, self.yaw = None, None, None
        self.grasp = None  # target_tool_yaw_grasp: planned at reset (an act_node.grasp.Grasp)
        # scene 'cameras': the Selector reads what the scene reader sees in the front camera at reset, never the
        # simulator's objects (the graph's scene reader node reads the same image: act_node.perception.scene)
        self.scene_source, self.scene_reader, self.seen = scene, scene_reader, None
        if scene == "cameras":
            height, width = scene_reader.config.image_size
            self.scene_rig = CameraRig(self.table.world, self.table.robot,
                                       camera_specs((scene_reader.config.camera,), height, width))
        if environment_layout in YAW_LAYOUTS:  # the yaw from the cameras at reset (act_node.perception.yaw)
            self.yaw_reader = yaw_reader
            self.yaw_rig = CameraRig(self.table.world, self.table.robot,
                                     camera_specs(YAW_READER_CAMERAS, *YAW_READER_IMAGE_SIZE))
        self.observation_space = spaces.Dict({
            "pixels": spaces.Dict({c.name: spaces.Box(0, 255, (c.height, c.width, 3), np.uint8) for c in self.cameras}),
            # measured joints can pass a limit by a hair (soft joint limits): the box allows a margin
            "agent_pos": spaces.Box((so101.LOWER_LEROBOT - OBSERVED_MARGIN).astype(np.float32),
                                    (so101.UPPER_LEROBOT + OBSERVED_MARGIN).astype(np.float32), dtype=np.float32),
            # the target's place and the request in [0, 1]; the tool relative to it within a table's length
            "environment_state": spaces.Box(
                np.array([-max(TABLE_SIZE_M, 1.0) if name in TOOL_NAMES + YAW_NAMES + GRASP_NAMES else 0.0
                          for name in names],
                         np.float32),
                np.full(len(names), max(TABLE_SIZE_M, 1.0), np.float32), dtype=np.float32),
        })
        self.action_space = spaces.Box(so101.LOWER_LEROBOT.astype(np.float32), so101.UPPER_LEROBOT.astype(np.float32),
                                       dtype=np.float32)
        self.target = TargetChoice(np.zeros(2), 0.0)
        self.steps = 0
        self.clamped_total = 0
        self._last_pixels: dict[str, np.ndarray] = {}

    @property
    def renderer(self) -> str:
        """What the cameras are drawn with: "tiny" or "egl" ("auto" resolved)."""
        return self.table.world.client.name

    @property
    def scene(self) -> Scene | None:
        return self.table.task.scene

    # --- gymnasium ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        self.table.reset(self.np_random, int(options.get("objects", self.object_count)),
                         request=options.get("request", self.fixed_request))
        if self.scene_source == "cameras":  # read once, before anything moved, as the graph's reader is asked
            image = self.scene_rig.render(tiny=True)[self.scene_reader.config.camera]
            self.seen = self.scene_reader.read(image)  # through the sim's camera as placed
            self.target = self.table.task.choose_target(self.selector, [(o.kind, o.x, o.y) for o in self.seen])
        else:
            self.target = self.table.task.choose_target(self.selector)
        if not self.target.selector_found and self.scene_source == "sim":
            warnings.warn(f"the Selector judged the {self.scene.request} absent from a scene that holds it; "
                          f"the true position stands in (reported as selector_found=False)", stacklevel=2)
        self.steps, self.clamped_total = 0, 0
        if self.yaw_reader is not None:  # read once, before anything moved, as the policy node reads it
            self.yaw = self.yaw_reader.read(self.yaw_rig.render(tiny=True), self.scene.request)
        if self.environment_layout in GRASP_LAYOUTS:  # planned once, from what the Selector read, as the node plans
            self.grasp = self._planned_grasp()
        return self.observe(), self._info(success=False, clamped=0)

    def object_poses(self) -> list[tuple[str, float, float, float]]:
        """The objects as the simulator holds them now, as the planner takes them: [(kind, x, y, yaw)], table
        frame."""
        return [(o.kind, float(o.position[0]), float(o.position[1]), o.yaw) for o in self.table.task.object_states()]

    def _planned_grasp(self):
        """The grasp the planner chooses now for the Selector's target, among the objects the Selector read (None
        when there is no target: the requested kind not seen, the episode ends before any policy is asked)."""
        if not np.all(np.isfinite(self.target.xy)):
            return None
        if self.scene_source == "cameras":
            objects = [(o.kind, float(o.x), float(o.y), float(o.yaw)) for o in self.seen]
        else:
            objects = self.object_poses()
        start = so101.to_lerobot(self.table.robot.joint_positions()).astype(np.float32)
        return self.grasp_planner(start, self.target.xy, self.scene.request, objects, self.fps, self.yaw)

    def step(self, action):
        reward, terminated, truncated, info = self.act(action)
        return self.observe(), reward, terminated, truncated, info

    def act(self, action) -> tuple[float, bool, bool, dict]:
        """`step` without the observation: (reward, terminated, truncated, info). Nothing is rendered, so a
        caller that needs no images this tick (a policy between re-plans) skips the cameras; the physics and
        the judgement are the same as step's. Call `observe()` when the next observation is needed."""
        if self.scene is None:
            raise RuntimeError("call reset() before step()")
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (6,):
            raise ValueError(f"action must have shape (6,) for joints {so101.JOINT_NAMES}, got {action.shape}")
        outcome = self.table.step(so101.from_lerobot(action))
        self.clamped_total += outcome.clamped
        self.steps += 1
        self._last_pixels = {}  # what render() would show is from an older tick now
        truncated = self.steps >= self.max_steps and not outcome.success
        info = self._info(outcome.success, outcome.clamped)
        if outcome.success or truncated:  # at the episode's end: which objects are up (a distractor, say), and why
            info["lifted"] = self.table.task.lifted()  # it ended (act_node.tabletop.outcomes: one of its MODES)
            info["outcome"] = self.table.watch.mode(outcome.success)
            info["outcome_facts"] = self.table.watch.facts.to_dict()
        return outcome.reward, outcome.success, truncated, info

    def observe(self, render: bool = True) -> dict:
        """The observation now: every camera rendered, or, `render` False, none (`pixels` empty: for a policy that
        reads no images; render() then has nothing to show until the next observation that renders)."""
        return self._observation(render)

    def render(self) -> np.ndarray:
        """All cameras of the latest observation side by side (H, sum of W, 3), uint8."""
        if not self._last_pixels:
            raise RuntimeError("no camera image yet: call reset() first, with at least one camera")
        return side_by_side(self._last_pixels)

    def close(self) -> None:
        self.table.close()

    # --- the task, as LeRobot reads it ------------------------------------------------------------------
    @property
    def task(self) -> str:
        return self.table.task.task

    @property
    def task_description(self) -> str:
        """LeRobot's rollout reads the language task under this name."""
        return self.task

    @property
    def _max_episode_steps(self) -> int:
        """LeRobot's rollout reads the step limit under this name (no TimeLimit wrapper here)."""
        return self.max_steps

    def _observation(self, render: bool = True) -> dict:
        self._last_pixels = self.table.rig.render() if render else {}
        tool = self.table.robot.link_pose("tcp")[0] if self.environment_layout != "target" else None
        if np.all(np.isfinite(self.target.xy)):
            return build_observation(self.table.robot.joint_positions(), self._last_pixels, self.target.xy,
                                     self.scene.request, self.environment_layout, tool, self.yaw, self._grasp())
        # scene cameras, the requested kind not seen: there is no target, and the numbers that hang on it are NaN
        # (act_node.episodes ends such an episode before any policy is asked, as the graph's policy waits)
        observation = build_observation(self.table.robot.joint_positions(), self._last_pixels, np.zeros(2),
                                        self.scene.request, self.environment_layout, tool, self.yaw, self._grasp())
        names = environment_state_names(self.environment_layout)
        unknown = [names.index(n) for n in ("target_x", "target_y", *TOOL_NAMES[:2]) if n in names]
        observation["environment_state"][unknown] = np.nan
        return observation

    def _grasp(self) -> np.ndarray | None:
        if self.grasp is None:  # no grasp layout, or no target: zeros stand in (the observation is never used)
            return np.zeros(len(GRASP_NAMES), np.float32) if self.environment_layout in GRASP_LAYOUTS else None
        return self.grasp.numbers

    def _info(self, success: bool, clamped: int) -> dict:
        grasp = {} if self.grasp is None else {"grasp_source": self.grasp.source}
        return {**grasp, "is_success": bool(success), "task": self.task, "clamped_joints": clamped,
                "clamped_total": self.clamped_total, "target_error_m": self.target.error_m,
                "selector_found": self.target.selector_found, "steps": self.steps}
