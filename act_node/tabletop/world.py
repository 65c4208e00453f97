"""The PyBullet world: one client, the table, the arm and the objects. Nothing else calls pybullet.

Frames: the table frame is the world frame; origin at a table corner, x and y in [0, 1] m along its
edges, z up, the table top at z = 0. The arm's base stands on the near edge's middle, facing +y.
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pybullet

from act_node import so101
from act_node.paths import share_dir
from act_node.tabletop.objects import ObjectKind

TABLE_SIZE_M = 1.0
TABLE_THICKNESS_M = 0.03
ARM_BASE_XY = np.array([0.5, 0.06])  # the arm's base on the table, metres
ARM_BASE_YAW = math.pi / 2  # facing +y, into the table
PHYSICS_HZ = 240
FRICTION = 1.0
JAW_FRICTION = 2.0  # rubber pads; pybullet multiplies the two bodies' coefficients


@dataclass
class PlacedObject:
    kind: ObjectKind
    xy: np.ndarray  # (2,) metres in the table frame
    yaw: float  # radians, the object's long axis from the table's x axis
    body: int = -1


def table_to_arm(xy: np.ndarray) -> np.ndarray:
    """(..., 2) table-frame positions -> the arm base frame (x forward, y left)."""
    d = np.asarray(xy, dtype=np.float64) - ARM_BASE_XY
    c, s = math.cos(ARM_BASE_YAW), math.sin(ARM_BASE_YAW)
    return np.stack([c * d[..., 0] + s * d[..., 1], -s * d[..., 0] + c * d[..., 1]], axis=-1)


class Client:
    """One pybullet connection (DIRECT: no window); pybullet's functions with this client's id filled in."""

    def __init__(self):
        self.id = pybullet.connect(pybullet.DIRECT)

    def __getattr__(self, name: str):
        function = getattr(pybullet, name)
        return functools.partial(function, physicsClientId=self.id) if callable(function) else function


class World:
    """Owns the pybullet client. `build()` starts from an empty simulation, so a seed fully fixes a scene."""

    def __init__(self, physics_hz: int = PHYSICS_HZ):
        self.client = Client()
        if not pybullet.isNumpyEnabled():
            raise RuntimeError("pybullet was built without numpy (isNumpyEnabled() == 0): images would come back as "
                               "Python lists; rebuild it with `pip install --no-build-isolation pybullet` after numpy")
        self.physics_hz = physics_hz
        self.arm = -1
        self.joints: list[int] = []
        self.links: dict[str, int] = {}
        self.objects: list[PlacedObject] = []

    def close(self) -> None:
        if self.client is not None:
            self.client.disconnect()
            self.client = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: pybullet may be gone already
            pass

    # --- building ------------------------------------------------------------------------------------
    def build(self, objects: list[PlacedObject], joints_rad: np.ndarray) -> None:
        """An empty world, then the table, the arm at `joints_rad` (6,) and the objects."""
        c = self.client
        c.resetSimulation()
        c.setGravity(0, 0, -9.81)
        c.setPhysicsEngineParameter(fixedTimeStep=1.0 / self.physics_hz, numSolverIterations=60,
                                    deterministicOverlappingPairs=1)
        with self.no_rendering():
            self._add_table()
            self._add_arm(joints_rad)
            self.objects = objects
            for placed in objects:
                placed.body = self._add_object(placed)

    @contextmanager
    def no_rendering(self):
        self.client.configureDebugVisualizer(pybullet.COV_ENABLE_RENDERING, 0)
        try:
            yield
        finally:
            self.client.configureDebugVisualizer(pybullet.COV_ENABLE_RENDERING, 1)

    def _add_table(self) -> None:
        c = self.client
        half = [TABLE_SIZE_M / 2, TABLE_SIZE_M / 2, TABLE_THICKNESS_M / 2]
        shape = c.createCollisionShape(pybullet.GEOM_BOX, halfExtents=half)
        visual = c.createVisualShape(pybullet.GEOM_BOX, halfExtents=half, rgbaColor=[0.78, 0.66, 0.5, 1])
        self.table = c.createMultiBody(0, shape, visual, [TABLE_SIZE_M / 2, TABLE_SIZE_M / 2, -TABLE_THICKNESS_M / 2])
        c.changeDynamics(self.table, -1, lateralFriction=FRICTION)
        floor = c.createVisualShape(pybullet.GEOM_BOX, halfExtents=[3, 3, 0.01], rgbaColor=[0.35, 0.35, 0.38, 1])
        c.createMultiBody(0, -1, floor, [0.5, 0.5, -0.76])  # seen by the cameras only

    def _add_arm(self, joints_rad: np.ndarray) -> None:
        c = self.client
        urdf = share_dir() / "sim" / "so101.urdf"
        if not urdf.is_file():
            raise FileNotFoundError(f"arm description missing: {urdf}")
        orientation = c.getQuaternionFromEuler([0, 0, ARM_BASE_YAW])
        self.arm = c.loadURDF(str(urdf), [*ARM_BASE_XY, 0.0], orientation, useFixedBase=True,
                              flags=pybullet.URDF_USE_INERTIA_FROM_FILE)
        names = {}
        for index in range(c.getNumJoints(self.arm)):
            info = c.getJointInfo(self.arm, index)
            names[info[1].decode()] = index
            self.links[info[12].decode()] = index
        missing = [name for name in so101.JOINT_NAMES if name not in names]
        if missing:
            raise ValueError(f"{urdf} lacks joints {missing}")
        self.joints = [names[name] for name in so101.JOINT_NAMES]
        for joint, angle in zip(self.joints, joints_rad):
            c.resetJointState(self.arm, joint, float(angle))
            c.changeDynamics(self.arm, joint, maxJointVelocity=so101.MAX_VELOCITY_RAD_S)
        for jaw in ("gripper_body", "moving_jaw"):
            c.changeDynamics(self.arm, self.links[jaw], lateralFriction=JAW_FRICTION, spinningFriction=0.003)
        self.command(joints_rad)

    def _add_object(self, placed: PlacedObject) -> int:
        c = self.client
        collision, visual = [], []
        for part in placed.kind.parts:
            if part.shape == "box":
                geom, shape_size = pybullet.GEOM_BOX, {"halfExtents": part.size}
                visual_size = shape_size
            elif part.shape == "sphere":
                geom, shape_size = pybullet.GEOM_SPHERE, {"radius": part.size[0]}
                visual_size = shape_size
            elif part.shape == "cylinder":  # pybullet names the length "height" for collisions, "length" for visuals
                geom = pybullet.GEOM_CYLINDER
                shape_size = {"radius": part.size[0], "height": part.size[1]}
                visual_size = {"radius": part.size[0], "length": part.size[1]}
            else:
                raise ValueError(f"{placed.kind.name}: unknown part shape {part.shape!r}")
            collision.append(c.createCollisionShape(geom, **shape_size, collisionFramePosition=part.offset))
            visual.append(c.createVisualShape(geom, **visual_size, rgbaColor=part.rgba,
                                              visualFramePosition=part.offset))
        # one part: a plain body; several: the first is the base, the rest are fixed links
        position = [float(placed.xy[0]), float(placed.xy[1]), 0.0005]
        orientation = c.getQuaternionFromEuler([0, 0, placed.yaw])
        rest = len(collision) - 1
        body = c.createMultiBody(
            baseMass=placed.kind.mass_kg * (1 if rest == 0 else 0.8), baseCollisionShapeIndex=collision[0],
            baseVisualShapeIndex=visual[0], basePosition=position, baseOrientation=orientation,
            linkMasses=[placed.kind.mass_kg * 0.2 / max(rest, 1)] * rest, linkCollisionShapeIndices=collision[1:],
            linkVisualShapeIndices=visual[1:], linkPositions=[[0, 0, 0]] * rest,
            linkOrientations=[[0, 0, 0, 1]] * rest, linkInertialFramePositions=[[0, 0, 0]] * rest,
            linkInertialFrameOrientations=[[0, 0, 0, 1]] * rest, linkParentIndices=[0] * rest,
            linkJointTypes=[pybullet.JOINT_FIXED] * rest, linkJointAxis=[[0, 0, 1]] * rest)
        for link in range(-1, rest):
            c.changeDynamics(body, link, lateralFriction=FRICTION,
                             rollingFriction=0.002 if placed.kind.round_ else 0.0,
                             spinningFriction=0.002 if placed.kind.round_ else 0.0)
        return body

    # --- arm ---------------------------------------------------------------------------------------
    def command(self, joints_rad: np.ndarray) -> None:
        """Position targets (6,) radians; the servos' torque and speed limits apply."""
        c = self.client
        for joint, target in zip(self.joints, joints_rad):
            c.setJointMotorControl2(self.arm, joint, pybullet.POSITION_CONTROL, targetPosition=float(target),
                                    force=so101.MAX_TORQUE_NM, maxVelocity=so101.MAX_VELOCITY_RAD_S,
                                    positionGain=0.6, velocityGain=1.0)

    def joint_positions(self) -> np.ndarray:
        """(6,) radians."""
        return np.array([state[0] for state in self.client.getJointStates(self.arm, self.joints)])

    def joint_velocities(self) -> np.ndarray:
        return np.array([state[1] for state in self.client.getJointStates(self.arm, self.joints)])

    def link_pose(self, link: str) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) and rotation matrix (3, 3) of a named link."""
        state = self.client.getLinkState(self.arm, self.links[link], computeForwardKinematics=True)
        rotation = np.array(self.client.getMatrixFromQuaternion(state[5])).reshape(3, 3)
        return np.array(state[4]), rotation

    def step(self, substeps: int) -> None:
        for _ in range(substeps):
            self.client.stepSimulation()

    # --- objects -----------------------------------------------------------------------------------
    def object_pose(self, placed: PlacedObject) -> tuple[np.ndarray, float]:
        position, orientation = self.client.getBasePositionAndOrientation(placed.body)
        return np.array(position), self.client.getEulerFromQuaternion(orientation)[2]

    def touches(self, placed: PlacedObject, link: str) -> bool:
        return len(self.client.getContactPoints(self.arm, placed.body, linkIndexA=self.links[link])) > 0

    def save_state(self) -> int:
        return self.client.saveState()

    def restore_state(self, state: int) -> None:
        self.client.restoreState(state)

    # --- cameras -----------------------------------------------------------------------------------
    def render(self, view: np.ndarray, projection: np.ndarray, width: int, height: int) -> np.ndarray:
        """An RGB image (height, width, 3) uint8 through TinyRenderer."""
        _, _, rgba, _, _ = self.client.getCameraImage(
            width, height, viewMatrix=view.T.flatten().tolist(), projectionMatrix=projection.T.flatten().tolist(),
            renderer=pybullet.ER_TINY_RENDERER, flags=pybullet.ER_NO_SEGMENTATION_MASK, shadow=0)
        return np.asarray(rgba, dtype=np.uint8).reshape(height, width, 4)[..., :3]
