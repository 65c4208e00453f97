"""Episodes on film: every camera side by side, a caption with the task, step and state."""

from __future__ import annotations

from pathlib import Path

import imageio.v2 as imageio
import numpy as np
from PIL import Image, ImageDraw


def side_by_side(images: dict[str, np.ndarray]) -> np.ndarray:
    """Camera images next to each other (max H, sum of W, 3), shorter ones padded below."""
    height = max(image.shape[0] for image in images.values())
    frames = [np.pad(image, ((0, height - image.shape[0]), (0, 0), (0, 0))) for image in images.values()]
    return np.concatenate(frames, axis=1)


def caption(frame: np.ndarray, text: str) -> np.ndarray:
    """The frame (H, W, 3) with a dark strip of text below it."""
    strip = Image.new("RGB", (frame.shape[1], 18), (20, 20, 20))
    ImageDraw.Draw(strip).text((4, 3), text, fill=(235, 235, 235))
    return np.concatenate([frame, np.asarray(strip)], axis=0)


def step_caption(seed: int, task: str, info: dict | None = None, reward: float | None = None) -> str:
    """The line under an episode's frame: seed, task, step, reward, and success when it came."""
    if info is None:
        return f"seed {seed}: {task}  step 0"
    return (f"seed {seed}: {task}  step {info['steps']}  reward {reward:.2f}"
            f"{'  success' if info['is_success'] else ''}")


def write_video(frames: list[np.ndarray], path: Path, fps: int) -> Path:
    """mp4 (H.264 through imageio's ffmpeg) or gif, by the suffix; sizes are padded to even numbers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = frames[0].shape[:2]
    pad = ((0, height % 2), (0, width % 2), (0, 0))
    if path.suffix == ".gif":
        imageio.mimsave(path, frames, duration=1000 / fps, loop=0)
    else:
        with imageio.get_writer(path, fps=fps, codec="libx264", quality=7, macro_block_size=1) as writer:
            for frame in frames:
                writer.append_data(np.pad(frame, pad))
    return path
