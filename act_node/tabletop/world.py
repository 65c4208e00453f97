"""The PyBullet world: the one class that calls pybullet. The robot, the task and the cameras ask it.

Frames: the table frame is the world frame; origin at a table corner, x and y in [0, 1] m along its
edges, z up, the table top at z = 0. The arm's base stands on the near edge's middle, facing +y.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from act_node.c_output import c_output_aside, quiet_pybullet
from act_node.table_frame import RENDER_CHOICES, RENDERERS, TABLE_SIZE_M
from act_node.tabletop.objects import ObjectKind

TABLE_THICKNESS_M = 0.03
ARM_BASE_XY = np.array([0.5, 0.06])  # the arm's base on the table, metres
ARM_BASE_YAW = math.pi / 2  # facing +y, into the table
PHYSICS_HZ = 240
FRICTION = 1.0
pybullet = quiet_pybullet()  # without the banner it prints at import (act_node.c_output)


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


PYBULLET_RENDERERS = dict(zip(RENDERERS, (pybullet.ER_TINY_RENDERER, pybullet.ER_BULLET_HARDWARE_OPENGL)))


def egl_plugin_path() -> str | None:
    """The file of pybullet's EGL renderer plugin (the eglRenderer module pybullet installs), if there is one."""
    spec = importlib.util.find_spec("eglRenderer")
    return spec.origin if spec is not None else None


_fallback_noted: list[str] = []  # why renderer "auto" drew with TinyRenderer in this process, said once


def _note_fallback(problem: str) -> None:
    if not _fallback_noted:
        print(f"act_node: renderer 'auto': {problem}; drawing the cameras with TinyRenderer", file=sys.stderr,
              flush=True)
    _fallback_noted.append(problem)


class Client:
    """One pybullet connection (DIRECT: no window); pybullet's functions with this client's id filled in.
    renderer "egl" loads pybullet's EGL plugin at once (it draws only the bodies created after it) and refuses
    to start without it; "auto" tries it and draws with TinyRenderer where it does not load, saying why on
    stderr once a process (the table-top first turns "auto" into "tiny" for small frames: auto_renderer).
    `name` is the renderer it draws with: "tiny" or "egl"."""

    def __init__(self, renderer: str = "tiny"):
        if renderer not in RENDER_CHOICES:
            raise ValueError(f"renderer must be one of {list(RENDER_CHOICES)}, got {renderer!r}")
        self.id = pybullet.connect(pybullet.DIRECT)
        self.egl = False
        if renderer != "tiny":
            problem = self._load_egl()
            if problem is None:
                self.egl = True
            elif renderer == "egl":
                pybullet.disconnect(self.id)
                raise RuntimeError(f"renderer 'egl': {problem}; renderer 'tiny' needs nothing")
            else:
                _note_fallback(problem)
        self.name = "egl" if self.egl else "tiny"
        self.renderer = PYBULLET_RENDERERS[self.name]
        self.thread = threading.get_ident()  # EGL's context is current on this thread alone

    def check_thread(self) -> None:
        """RuntimeError when EGL would draw on another thread than the one that made this client: its GL context
        is current only there, and drawing elsewhere crashes the process (measured: a segmentation fault)."""
        if self.egl and threading.get_ident() != self.thread:
            raise RuntimeError(f"renderer 'egl' draws only on the thread that made the world "
                               f"({self.thread}; this is {threading.get_ident()}): pybullet's EGL context is "
                               "current there alone. Build and spin the sim on one thread (act_node's node "
                               "runner does), or use renderer 'tiny'")

    def _load_egl(self) -> str | None:
        """Load pybullet's EGL plugin into this client; None, or why it did not load."""
        path = egl_plugin_path()
        if path is None:
            return "pybullet could not load its eglRenderer plugin (not in this pybullet install)"
        with c_output_aside(keep=True) as said:
            plugin = pybullet.loadPlugin(path, "_eglRendererPlugin", physicsClientId=self.id)
        if plugin < 0:
            report = " ".join(" ".join(said).split())[-300:]
            return ("pybullet could not load its eglRenderer plugin (no EGL library? on Debian/Ubuntu: apt-get "
                    "install libegl1 libegl-mesa0 libgl1-mesa-dri)" + (f"; it said: {report}" if report else ""))
        return None

    def disconnect(self) -> None:
        with c_output_aside(self.egl):
            pybullet.disconnect(physicsClientId=self.id)

    def __getattr__(self, name: str):
        function = getattr(pybullet, name)
        return functools.partial(function, physicsClientId=self.id) if callable(function) else function


class World:
    """Owns the pybullet client: the table, bodies, joints, stepping, contacts and rendering.
    `clear()` starts from an empty simulation, so a seed fully fixes what is built after it."""

    def __init__(self, physics_hz: int = PHYSICS_HZ, renderer: str = "tiny"):
        if not pybullet.isNumpyEnabled():
            raise RuntimeError("pybullet was built without numpy (isNumpyEnabled() == 0): images would come back as "
                               "Python lists; rebuild it with `pip install --no-build-isolation pybullet` after numpy")
        self.client = Client(renderer)
        self.physics_hz = physics_hz

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
    def clear(self) -> None:
        """An empty simulation with gravity and this world's fixed time step."""
        c = self.client
        c.resetSimulation()
        c.setGravity(0, 0, -9.81)
        c.setPhysicsEngineParameter(fixedTimeStep=1.0 / self.physics_hz, numSolverIterations=60,
                                    deterministicOverlappingPairs=1)

    @contextmanager
    def no_rendering(self) -> Iterator[None]:
        self.client.configureDebugVisualizer(pybullet.COV_ENABLE_RENDERING, 0)
        try:
            yield
        finally:
            self.client.configureDebugVisualizer(pybullet.COV_ENABLE_RENDERING, 1)

    def add_table(self) -> None:
        c = self.client
        half = [TABLE_SIZE_M / 2, TABLE_SIZE_M / 2, TABLE_THICKNESS_M / 2]
        shape = c.createCollisionShape(pybullet.GEOM_BOX, halfExtents=half)
        visual = c.createVisualShape(pybullet.GEOM_BOX, halfExtents=half, rgbaColor=[0.78, 0.66, 0.5, 1])
        table = c.createMultiBody(0, shape, visual, [TABLE_SIZE_M / 2, TABLE_SIZE_M / 2, -TABLE_THICKNESS_M / 2])
        c.changeDynamics(table, -1, lateralFriction=FRICTION)
        floor = c.createVisualShape(pybullet.GEOM_BOX, halfExtents=[3, 3, 0.01], rgbaColor=[0.35, 0.35, 0.38, 1])
        c.createMultiBody(0, -1, floor, [0.5, 0.5, -0.76])  # seen by the cameras only

    def load_urdf(self, path: Path, xy: np.ndarray, yaw: float) -> tuple[int, dict[str, int], dict[str, int]]:
        """A fixed-base body: (body, {joint name: index}, {link name: index})."""
        if not path.is_file():
            raise FileNotFoundError(f"robot description missing: {path}")
        c = self.client
        body = c.loadURDF(str(path), [*xy, 0.0], c.getQuaternionFromEuler([0, 0, yaw]), useFixedBase=True,
                          flags=pybullet.URDF_USE_INERTIA_FROM_FILE)
        joints, links = {}, {}
        for index in range(c.getNumJoints(body)):
            info = c.getJointInfo(body, index)
            joints[info[1].decode()] = index
            links[info[12].decode()] = index
        return body, joints, links

    def add_object(self, placed: PlacedObject) -> int:
        """The object's parts as one body standing on the table; returns the body id (also set on `placed`)."""
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
        placed.body = body
        return body

    # --- joints ------------------------------------------------------------------------------------
    def joint_limits(self, body: int, joint: int) -> tuple[float, float, float, float]:
        """(lower, upper, max force, max velocity) as the robot description gives them."""
        info = self.client.getJointInfo(body, joint)
        return info[8], info[9], info[10], info[11]

    def reset_joint(self, body: int, joint: int, angle: float) -> None:
        self.client.resetJointState(body, joint, float(angle))

    def set_link_dynamics(self, body: int, link: int, **dynamics: float) -> None:
        self.client.changeDynamics(body, link, **dynamics)

    def drive_joints(self, body: int, joints: list[int], targets: np.ndarray, forces: np.ndarray, max_velocity: float,
                     position_gain: float, velocity_gain: float) -> None:
        """Position control towards `targets` (radians), with each joint's torque limit and the speed limit."""
        for joint, target, force in zip(joints, targets, forces, strict=True):
            self.client.setJointMotorControl2(body, joint, pybullet.POSITION_CONTROL, targetPosition=float(target),
                                              force=float(force), maxVelocity=max_velocity,
                                              positionGain=position_gain, velocityGain=velocity_gain)

    def joint_states(self, body: int, joints: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities (len(joints),), radians and rad/s."""
        states = self.client.getJointStates(body, joints)
        return np.array([s[0] for s in states]), np.array([s[1] for s in states])

    def link_pose(self, body: int, link: int) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) and rotation matrix (3, 3) of a link."""
        state = self.client.getLinkState(body, link, computeForwardKinematics=True)
        rotation = np.array(self.client.getMatrixFromQuaternion(state[5])).reshape(3, 3)
        return np.array(state[4]), rotation

    # --- bodies, contacts, time ----------------------------------------------------------------------
    def body_pose(self, body: int) -> tuple[np.ndarray, float]:
        """Base position (3,) metres and yaw (radians) of a body."""
        position, orientation = self.client.getBasePositionAndOrientation(body)
        return np.array(position), self.client.getEulerFromQuaternion(orientation)[2]

    def touching(self, body_a: int, link_a: int, body_b: int) -> bool:
        return len(self.client.getContactPoints(body_a, body_b, linkIndexA=link_a)) > 0

    def step(self, substeps: int) -> None:
        for _ in range(substeps):
            self.client.stepSimulation()

    def save_state(self) -> int:
        return self.client.saveState()

    def restore_state(self, state: int) -> None:
        self.client.restoreState(state)

    # --- cameras -----------------------------------------------------------------------------------
    def render(self, view: np.ndarray, projection: np.ndarray, width: int, height: int,
               tiny: bool = False) -> np.ndarray:
        """An RGB image (height, width, 3) uint8 through the client's renderer (TinyRenderer or EGL); `tiny`:
        through TinyRenderer whatever the client's (what a network trained on TinyRenderer's images reads)."""
        self.client.check_thread()
        renderer = PYBULLET_RENDERERS["tiny"] if tiny else self.client.renderer
        with c_output_aside(self.client.egl):  # EGL's first frame prints
            _, _, rgba, _, _ = self.client.getCameraImage(
                width, height, viewMatrix=view.T.flatten().tolist(), projectionMatrix=projection.T.flatten().tolist(),
                renderer=renderer, flags=pybullet.ER_NO_SEGMENTATION_MASK, shadow=0)
        return np.asarray(rgba, dtype=np.uint8).reshape(height, width, 4)[..., :3]
