"""The scene reader: a front-camera image -> each kind on the table, where it stands in the `table` frame, how it
lies, and how sure the reader is. What the find-the-cup selector reads on scene/objects, from pixels.

A small fully convolutional network answers in the image, one heat map per kind (each kind is on the table at
most once, so a kind's answer is its map's peak), with the centre's sub-cell offset and the long axis's angle
(cos k*phi, sin k*phi, k the kind's symmetry) at that peak. The image answer becomes a table answer through the
camera's calibration (`CameraCalibration`: intrinsics, as camera_info gives them, and the camera's pose in
`table`): the ray through the centre pixel meets the plane of the kind's centre (half its height above the
table). A moved camera, or another one, needs a new calibration, not a new network.

    reader = SceneReader.load()                                    # models/scene_reader
    objects = reader.read(image, calibration)                      # [SeenObject(kind, x, y, yaw, score)]
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from act_node.table_frame import KIND_NAMES, TABLE_SIZE_M
from act_node.tabletop.objects import KINDS

READER_CAMERA = "front"
STRIDE = 2  # image pixels a cell of the maps spans, each way
# each kind's centre above the table (half its height) and its symmetry about the vertical (2: a pen, 4: the
# cube, 0: round), as act_node.tabletop.objects makes them
HALF_HEIGHT_M = {name: kind.height_m / 2 for name, kind in KINDS.items()}
TURNS = {name: kind.grasp_turns for name, kind in KINDS.items()}


def default_model_dir() -> Path:
    from act_node.paths import share_dir

    return share_dir() / "models" / "scene_reader"


@dataclass(frozen=True)
class CameraCalibration:
    """A pinhole camera in the table frame: K (3, 3) pixels and the optical frame (x right, y down, z forward)'s
    position (3,) and rotation (3, 3), both in `table`; `size` (height, width) the image K belongs to."""

    intrinsics: np.ndarray
    position: np.ndarray
    rotation: np.ndarray
    size: tuple[int, int]

    def __post_init__(self):
        k, p, r = (np.asarray(a, dtype=np.float64) for a in (self.intrinsics, self.position, self.rotation))
        if k.shape != (3, 3) or p.shape != (3,) or r.shape != (3, 3):
            raise ValueError(f"calibration needs K (3, 3), position (3,), rotation (3, 3); got {k.shape}, "
                             f"{p.shape}, {r.shape}")
        if not (np.all(np.isfinite(k)) and np.all(np.isfinite(p)) and np.all(np.isfinite(r))):
            raise ValueError("calibration has NaN or inf")
        if abs(np.linalg.det(r) - 1) > 1e-3 or not np.allclose(r.T @ r, np.eye(3), atol=1e-3):
            raise ValueError("calibration rotation is not a rotation (R^T R != I or det != 1)")
        object.__setattr__(self, "intrinsics", k)
        object.__setattr__(self, "position", p)
        object.__setattr__(self, "rotation", r)
        object.__setattr__(self, "size", (int(self.size[0]), int(self.size[1])))

    def scaled(self, height: int, width: int) -> CameraCalibration:
        """The same camera at another image size (K scaled; the pose unchanged)."""
        sy, sx = height / self.size[0], width / self.size[1]
        k = self.intrinsics.copy()
        k[0] *= sx
        k[1] *= sy
        return CameraCalibration(k, self.position, self.rotation, (height, width))

    def to_table(self, pixels: np.ndarray, height_m: np.ndarray) -> np.ndarray:
        """Pixels (N, 2) (u right, v down, continuous) -> (N, 2) table x, y where each pixel's ray meets the plane
        `height_m` (N,) above the table; NaN where the ray does not come down to it."""
        pixels = np.asarray(pixels, dtype=np.float64).reshape(-1, 2)
        rays = np.linalg.solve(self.intrinsics, np.c_[pixels, np.ones(len(pixels))].T).T @ self.rotation.T
        t = (np.asarray(height_m, dtype=np.float64) - self.position[2]) / np.where(rays[:, 2] == 0, 1e-12,
                                                                                    rays[:, 2])
        points = self.position[:2] + t[:, None] * rays[:, :2]
        return np.where((t > 0)[:, None], points, np.nan)

    def to_image(self, points: np.ndarray) -> np.ndarray:
        """Table points (N, 3) -> pixels (N, 2)."""
        camera = (np.asarray(points, dtype=np.float64).reshape(-1, 3) - self.position) @ self.rotation
        return (camera @ self.intrinsics.T)[:, :2] / camera[:, 2:3]

    # --- files and the simulator's cameras ------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"intrinsics": self.intrinsics.tolist(), "position": self.position.tolist(),
                "rotation": self.rotation.tolist(), "size": list(self.size)}

    def save(self, path: Path, **about) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps({**self.to_dict(), **about}, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> CameraCalibration:
        """A calibration file (act-sim calibrate writes one); ValueError naming the file and what is wrong."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"camera calibration {path} does not exist (make one with act-sim calibrate)")
        try:
            data = json.loads(path.read_text())
            return cls(np.array(data["intrinsics"]), np.array(data["position"]), np.array(data["rotation"]),
                       tuple(data["size"]))
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as error:
            raise ValueError(f"camera calibration {path}: {error}") from error

    @classmethod
    def of_sim(cls, height: int, width: int, camera: str = READER_CAMERA) -> CameraCalibration:
        """The simulator's fixed camera as it is placed (act_node.tabletop.cameras.CAMERAS): exact."""
        from act_node.tabletop.cameras import CAMERAS, CameraSpec, look_at

        spec = CameraSpec(camera, height, width, **CAMERAS[camera])
        if spec.eye is None:
            raise ValueError(f"camera {camera!r} rides on the arm: it has no fixed calibration")
        eye = np.array(spec.eye)
        return cls(spec.intrinsics(), eye, look_at(eye, np.array(spec.target)), (height, width))


@dataclass(frozen=True)
class SeenObject:
    """One kind the reader found: where it stands on the table (x, y, metres), its yaw (radians, by its symmetry:
    in [0, 2 pi / k); 0 for a round kind), how sure (0..1) and where it is in the image (u, v)."""

    kind: str
    x: float
    y: float
    yaw: float
    score: float
    u: float
    v: float


def network(width: int = 32):
    """The reader's network: (B, 3, H, W) in [0, 1] -> (B, 8 + 16 + 16, H / 2, W / 2): per kind a heat logit,
    the centre's offset in its cell (u, v) and (cos k phi, sin k phi)."""
    from torch import nn

    def block(cin, cout, stride=1, dilation=1):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, padding=dilation, dilation=dilation, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def pointwise(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    class SceneNet(nn.Module):
        def __init__(self):
            super().__init__()
            kinds = len(KIND_NAMES)
            self.stem = nn.Sequential(block(5, width, 2), block(width, width))  # /2 (+ u, v coordinates)
            self.down1 = nn.Sequential(block(width, 2 * width, 2), block(2 * width, 2 * width))  # /4
            self.down2 = nn.Sequential(block(2 * width, 4 * width, 2), block(4 * width, 4 * width, dilation=2),
                                       block(4 * width, 4 * width, dilation=4))  # /8, wide context
            self.up1 = nn.Sequential(pointwise(6 * width, 2 * width), block(2 * width, 2 * width))
            self.up2 = nn.Sequential(pointwise(3 * width, width), block(width, width))
            self.head = nn.Conv2d(width, 5 * kinds, 1)
            nn.init.constant_(self.head.bias[:kinds], -4.0)  # most cells hold nothing

        def forward(self, images):
            import torch
            from torch.nn import functional as F

            b, _, h, w = images.shape
            v = torch.linspace(-1, 1, h, device=images.device).view(1, 1, h, 1).expand(b, 1, h, w)
            u = torch.linspace(-1, 1, w, device=images.device).view(1, 1, 1, w).expand(b, 1, h, w)
            x = torch.cat([(images - 0.5) / 0.25, u, v], 1)
            s2 = self.stem(x)
            s4 = self.down1(s2)
            s8 = self.down2(s4)
            x = self.up1(torch.cat([F.interpolate(s8, size=s4.shape[-2:], mode="bilinear", align_corners=False),
                                    s4], 1))
            x = self.up2(torch.cat([F.interpolate(x, size=s2.shape[-2:], mode="bilinear", align_corners=False),
                                    s2], 1))
            return self.head(x)

    return SceneNet()


@dataclass(frozen=True)
class ReaderConfig:
    """What a reader was trained on: its image size, its network's width and the score that counts as seen."""

    image_size: tuple[int, int] = (96, 128)
    width: int = 32
    threshold: float = 0.5
    camera: str = READER_CAMERA
    kinds: tuple[str, ...] = KIND_NAMES


def decode(maps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maps (40, h, w) (sigmoid already applied to the 8 heat maps) -> per kind: score (8,), centre pixel (8, 2)
    and axis angle in the image phi (8,) (radians; 0 for a round kind)."""
    kinds = len(KIND_NAMES)
    heat, offset, axis = maps[:kinds], maps[kinds:3 * kinds], maps[3 * kinds:]
    h, w = heat.shape[1:]
    flat = heat.reshape(kinds, -1).argmax(1)
    rows, cols = np.divmod(flat, w)
    index = np.arange(kinds)
    score = heat[index, rows, cols]
    du, dv = offset[2 * index, rows, cols], offset[2 * index + 1, rows, cols]
    pixels = np.stack([(cols + du) * STRIDE, (rows + dv) * STRIDE], 1)
    turns = np.array([TURNS[k] for k in KIND_NAMES])
    cos, sin = axis[2 * index, rows, cols], axis[2 * index + 1, rows, cols]
    phi = np.where(turns > 0, np.arctan2(sin, cos) / np.maximum(turns, 1), 0.0)
    return score, pixels, phi


def table_yaw(calibration: CameraCalibration, pixel: np.ndarray, phi: float, kind: str) -> float:
    """The image axis angle `phi` at `pixel` -> the yaw on the table in [0, 2 pi / k) (0 for a round kind)."""
    turns = TURNS[kind]
    if turns == 0:
        return 0.0
    step = 2.0  # pixels along the axis
    ends = np.stack([pixel, pixel + step * np.array([math.cos(phi), math.sin(phi)])])
    a, b = calibration.to_table(ends, np.full(2, HALF_HEIGHT_M[kind]))
    yaw = math.atan2(b[1] - a[1], b[0] - a[0])
    return float(yaw % (2 * math.pi / turns))


class SceneReader:
    """A trained reader: `read` one image -> the kinds it sees, in the table frame."""

    def __init__(self, model, config: ReaderConfig, threads: int | None = None):
        import torch

        self.model, self.config = model.eval(), config
        if threads:
            torch.set_num_threads(int(threads))

    @classmethod
    def load(cls, folder: Path | str | None = None, threads: int | None = None) -> SceneReader:
        """A reader folder (reader.json, model.safetensors); default the package's models/scene_reader. A missing
        or wrong folder is an error naming it and what is wrong."""
        from safetensors.torch import load_file

        folder = Path(folder) if folder else default_model_dir()
        config_path, weights_path = folder / "reader.json", folder / "model.safetensors"
        for path in (config_path, weights_path):
            if not path.is_file():
                raise FileNotFoundError(f"scene reader {folder}: {path.name} is missing (train one with act-lab "
                                        f"scene-reader, or give the package's models/scene_reader)")
        data = json.loads(config_path.read_text())
        if data.get("kind") != "scene_reader":
            raise ValueError(f"{config_path} is not a scene reader's (kind {data.get('kind')!r})")
        config = ReaderConfig(tuple(data["image_size"]), int(data["width"]), float(data["threshold"]),
                              data.get("camera", READER_CAMERA), tuple(data.get("kinds", KIND_NAMES)))
        if config.kinds != KIND_NAMES:
            raise ValueError(f"{config_path}: reader trained on kinds {list(config.kinds)}, this package has "
                             f"{list(KIND_NAMES)}")
        model = network(config.width)
        try:
            model.load_state_dict(load_file(str(weights_path)))
        except RuntimeError as error:
            raise ValueError(f"{weights_path} does not fit the reader network of width {config.width}: "
                             f"{str(error).splitlines()[0]}") from error
        return cls(model, config, threads)

    def save(self, folder: Path, **about) -> None:
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.model.state_dict().items()}, str(folder / "model.safetensors"))
        config = asdict(self.config)
        (folder / "reader.json").write_text(json.dumps({"kind": "scene_reader", **config, **about}, indent=1) + "\n")

    def maps(self, images: np.ndarray) -> np.ndarray:
        """Images (B, H, W, 3) uint8 at the reader's size -> maps (B, 40, H / 2, W / 2), heat as sigmoid."""
        import torch

        images = np.asarray(images)
        if images.ndim != 4 or images.shape[1:] != (*self.config.image_size, 3):
            raise ValueError(f"scene reader reads (B, {self.config.image_size[0]}, {self.config.image_size[1]}, 3) "
                             f"images, got {images.shape}")
        with torch.inference_mode():
            x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0
            out = self.model(x)
            kinds = len(KIND_NAMES)
            out[:, :kinds] = torch.sigmoid(out[:, :kinds])
        return out.numpy()

    def prepare(self, image: np.ndarray) -> np.ndarray:
        """An image (H, W, 3) uint8 of any size -> the reader's size (resized as the policy's processor does)."""
        image = np.asarray(image)
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(f"scene reader reads an (H, W, 3) uint8 image, got {image.shape} {image.dtype}")
        if image.shape[:2] == tuple(self.config.image_size):
            return image
        import torch
        from torch.nn import functional as F

        x = torch.from_numpy(image).permute(2, 0, 1)[None].float()
        x = F.interpolate(x, size=self.config.image_size, mode="bilinear", align_corners=False, antialias=True)
        return x[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()

    def read(self, image: np.ndarray, calibration: CameraCalibration | None = None) -> list[SeenObject]:
        """One image (H, W, 3) uint8 and its camera's calibration (at that size; None: the sim's camera as the sim
        places it, exact there and wrong anywhere else) -> the kinds seen."""
        height, width = self.config.image_size
        if calibration is None:
            calibration = CameraCalibration.of_sim(height, width, self.config.camera)
        calibration = calibration.scaled(height, width)
        return self.objects(self.maps(self.prepare(image)[None])[0], calibration)

    def objects(self, maps: np.ndarray, calibration: CameraCalibration) -> list[SeenObject]:
        score, pixels, phi = decode(maps)
        heights = np.array([HALF_HEIGHT_M[k] for k in KIND_NAMES])
        xy = calibration.to_table(pixels, heights)
        seen = []
        for row, kind in enumerate(KIND_NAMES):
            if score[row] < self.config.threshold or not np.all(np.isfinite(xy[row])):
                continue
            if not np.all((xy[row] >= 0) & (xy[row] <= TABLE_SIZE_M)):  # beyond the table's edge: not on it
                continue
            seen.append(SeenObject(kind, float(xy[row, 0]), float(xy[row, 1]),
                                   table_yaw(calibration, pixels[row], float(phi[row]), kind), float(score[row]),
                                   float(pixels[row, 0]), float(pixels[row, 1])))
        return seen
