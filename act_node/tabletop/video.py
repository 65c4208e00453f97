"""Episodes on film: every camera side by side, a caption with the task, step and state.

The graph's films (the sim node's video_dir:=) are for a person to watch: each camera view is drawn at least
FILM_WIDTH pixels wide, enlarged from what the cameras rendered (the policy still reads the rendered size), with
the task under every frame and the outcome held for a second at the end; a picture of three moments (start,
middle, end with the outcome) is written beside the video.

    shots = [Shot({"front": rgb, "wrist": rgb}, "episode 1: pick up the pen  t 0.03 s"), ...]
    write_film(shots, "episode 1: pick up the pen  succeeded after 160 steps", Path("episode1_seed7.mp4"), 30)
    # -> episode1_seed7.mp4 and episode1_seed7.png
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import imageio.v2 as imageio
import numpy as np
from PIL import Image, ImageDraw, ImageFont

FILM_WIDTH = 480  # pixels: the least width a camera view is drawn at on film (the 96x128 cameras: 4x)
PICTURE_SHOTS = 3  # moments in an episode's picture: the start, the middle, the end


@dataclass(frozen=True)
class Shot:
    """One tick on film: the cameras' images as they were rendered, {camera: (H, W, 3) uint8}, and its caption."""

    images: dict[str, np.ndarray]
    text: str


def side_by_side(images: dict[str, np.ndarray]) -> np.ndarray:
    """Camera images next to each other (max H, sum of W, 3), shorter ones padded below."""
    height = max(image.shape[0] for image in images.values())
    frames = [np.pad(image, ((0, height - image.shape[0]), (0, 0), (0, 0))) for image in images.values()]
    return np.concatenate(frames, axis=1)


def enlarged(image: np.ndarray, min_width: int = FILM_WIDTH) -> np.ndarray:
    """The image (H, W, 3) scaled by the smallest whole factor that makes it at least `min_width` wide (bicubic)."""
    factor = max(1, math.ceil(min_width / image.shape[1]))
    if factor == 1:
        return image
    size = (image.shape[1] * factor, image.shape[0] * factor)
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BICUBIC))


def caption(frame: np.ndarray, text: str) -> np.ndarray:
    """The frame (H, W, 3) with a dark strip of text below it; the text grows with the frame's width."""
    size = max(11, min(28, frame.shape[1] // 48))  # 11 px under a 256-wide frame, 21 under two 512-wide views
    strip = Image.new("RGB", (frame.shape[1], size + 8), (20, 20, 20))
    ImageDraw.Draw(strip).text((4, 3), text, fill=(235, 235, 235), font=ImageFont.load_default(size=size))
    return np.concatenate([frame, np.asarray(strip)], axis=0)


def named(image: np.ndarray, name: str) -> np.ndarray:
    """The view with its camera's name and rendered size in its top left corner ("front 96x128")."""
    view = Image.fromarray(image)
    size = max(11, min(20, image.shape[1] // 32))
    ImageDraw.Draw(view).text((6, 4), name, fill=(255, 255, 255), font=ImageFont.load_default(size=size),
                              stroke_width=2, stroke_fill=(0, 0, 0))
    return np.asarray(view)


def film_frame(images: dict[str, np.ndarray], text: str, min_width: int = FILM_WIDTH) -> np.ndarray:
    """The cameras side by side, each at least `min_width` wide and named with its rendered size, captioned."""
    views = {name: named(enlarged(image, min_width), f"{name} {image.shape[0]}x{image.shape[1]}")
             for name, image in images.items()}
    return caption(side_by_side(views), text)


def step_caption(seed: int, task: str, info: dict | None = None, reward: float | None = None) -> str:
    """The line under an episode's frame: seed, task, step, reward, and success when it came."""
    if info is None:
        return f"seed {seed}: {task}  step 0"
    return (f"seed {seed}: {task}  step {info['steps']}  reward {reward:.2f}"
            f"{'  success' if info['is_success'] else ''}")


def write_video(frames: Iterable[np.ndarray], path: Path, fps: int) -> Path:
    """mp4 (H.264 through imageio's ffmpeg) or gif, by the suffix; sizes are padded to even numbers. The frames
    are encoded as they come (an iterator keeps one in memory); they all have the first one's size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gif":
        imageio.mimsave(path, list(frames), duration=1000 / fps, loop=0)
        return path
    with imageio.get_writer(path, fps=fps, codec="libx264", quality=7, macro_block_size=1) as writer:
        for frame in frames:
            height, width = frame.shape[:2]
            writer.append_data(np.pad(frame, ((0, height % 2), (0, width % 2), (0, 0))))
    return path


def write_film(shots: list[Shot], outcome: str, path: Path, fps: int, min_width: int = FILM_WIDTH) -> tuple[Path, Path]:
    """The episode's video at `path` (.mp4 or .gif), its last shot held a second under `outcome`, and its picture
    beside it (.png): PICTURE_SHOTS moments stacked, the last captioned with the outcome. ValueError if no shot."""
    if not shots:
        raise ValueError(f"{path}: an episode film needs at least one shot")
    last = shots[-1]
    frames = (film_frame(s.images, s.text, min_width) for s in shots)
    held = (film_frame(last.images, outcome, min_width) for _ in range(fps))
    video = write_video((frame for part in (frames, held) for frame in part), Path(path), fps)
    picked = sorted({round(k * (len(shots) - 1) / (PICTURE_SHOTS - 1)) for k in range(PICTURE_SHOTS)})
    moments = [film_frame(shots[k].images, shots[k].text if k != len(shots) - 1 else outcome, min_width)
               for k in picked]
    picture = Path(path).with_suffix(".png")
    Image.fromarray(np.concatenate(moments, axis=0)).save(picture, optimize=True)
    return video, picture
