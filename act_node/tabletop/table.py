"""The table-top in SI units: one world, the arm, the pick task and the cameras, stepped at a control rate.

    table = TableTop(cameras=camera_specs(("front", "wrist"), 240, 320))
    table.reset(seed=0, objects=4)                  # the scene, the arm at its home pose, objects settled
    outcome = table.step(command_rad)               # (6,) radians; physics for one control tick
    images = table.rig.render()                     # {camera: (H, W, 3) uint8}, only when asked

The gymnasium env (env.py) wraps this with LeRobot's units at its edge; the sim node drives it directly in
radians, so nothing is converted there and back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from act_node import so101
from act_node.tabletop.cameras import CameraRig, CameraSpec, auto_renderer
from act_node.tabletop.outcomes import OutcomeWatch
from act_node.tabletop.robot import Robot
from act_node.tabletop.scene import Scene
from act_node.tabletop.task import PickTask
from act_node.tabletop.world import PHYSICS_HZ, World

# The pose each episode starts from (degrees, gripper 0-100): tool nearly down, 15 cm above the table.
HOME_LEROBOT = np.array([0.0, -28.0, 12.0, 85.0, 0.0, 20.0])
HOME_NOISE_DEG = 3.0  # uniform noise on each body joint's home angle


@dataclass(frozen=True)
class StepOutcome:
    """One control tick: joints the command had clamped, success and the dense reward after it."""

    clamped: int
    success: bool
    reward: float


class TableTop:
    def __init__(self, cameras: list[CameraSpec], fps: int, renderer: str = "tiny"):
        if PHYSICS_HZ % fps:
            raise ValueError(f"fps {fps} must divide the physics rate {PHYSICS_HZ} Hz")
        self.fps = fps
        # "auto": TinyRenderer for small frames, where it is the faster (auto_renderer); else EGL where it loads
        self.world = World(renderer=auto_renderer(cameras) if renderer == "auto" else renderer)
        self.robot = Robot(self.world)
        self.task = PickTask(self.world, self.robot)
        self.watch = OutcomeWatch(self.task, self.robot)  # why the episode ends (act_node.tabletop.outcomes)
        self.rig = CameraRig(self.world, self.robot, cameras)
        self.substeps = PHYSICS_HZ // fps

    def reset(self, rng: np.random.Generator, objects: int, request: str | None = None) -> Scene:
        """A fresh world: the sampled scene, the arm at its home pose (with noise from `rng`), settled."""
        scene = self.task.sample(rng, objects, request)
        home = HOME_LEROBOT + np.append(rng.uniform(-HOME_NOISE_DEG, HOME_NOISE_DEG, 5), 0.0)
        self.world.clear()
        with self.world.no_rendering():
            self.world.add_table()
            self.robot.load(so101.from_lerobot(home))
            self.task.place()
        self.world.step(self.substeps)  # let the objects settle on the table
        self.task.settled()
        self.watch.reset()
        return scene

    def step(self, command_rad: np.ndarray) -> StepOutcome:
        """Command the arm (6,) radians, run one control tick of physics, judge the task."""
        clamped = self.robot.command(command_rad)
        self.world.step(self.substeps)
        self.watch.tick(command_rad)
        success = self.task.is_success()
        return StepOutcome(clamped, success, self.task.reward(success))

    def close(self) -> None:
        self.world.close()
