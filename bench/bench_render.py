"""Camera rendering, TinyRenderer against pybullet's EGL renderer plugin, side by side in one run.

  tiny   pybullet.ER_TINY_RENDERER: pybullet's own software rasteriser (renderer auto below
         act_node.tabletop.cameras.EGL_FROM_PIXELS a frame)
  egl    the eglRenderer plugin with ER_BULLET_HARDWARE_OPENGL: OpenGL through EGL, here Mesa's llvmpipe
         (a CPU renderer; on a machine with a GPU and its EGL driver the same call renders on the GPU)

Two table-tops built by act_node.tabletop.env.PickObjectEnv(objects=4, cameras=("front",), renderer=...) with
the same seed, one per renderer (the sim's renderer:= / act-sim's --renderer); each frame is the front camera's
view through the env's own render path (CameraRig.render). The two pictures are compared so that a faster
renderer is not a different picture:
mean absolute difference (0-255), the same with each channel's mean brightness matched (the renderers light
the scene differently; what remains is geometry), and the share of pixels off by more than 32 in a channel.
Rounds alternate the renderers; times are per frame.

Run: .venv/bin/python bench/bench_render.py [--frames 20] [--rounds 3] [--sizes 96x128 ... 480x640] [--save DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from act_node.table_frame import RENDERERS
from act_node.tabletop.env import PickObjectEnv

SEED = 3


class Table:
    """A table-top and its front camera, rendered through the env's own path (CameraRig.render) by the
    renderer the env was built with (PickObjectEnv(renderer=...))."""

    def __init__(self, renderer: str, size: tuple[int, int]):
        self.env = PickObjectEnv(objects=4, cameras=("front",), image_size=size, target_source="truth",
                                 renderer=renderer)
        self.env.reset(seed=SEED)

    def render(self) -> np.ndarray:
        return self.env.table.rig.render(["front"])["front"]

    def close(self) -> None:
        self.env.close()


def frame_ms(table: Table, frames: int) -> list[float]:
    times = []
    for _ in range(frames):
        began = time.perf_counter()
        table.render()
        times.append(1000 * (time.perf_counter() - began))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=20, help="frames per renderer and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", nargs="+", default=["96x128", "144x192", "168x224", "240x320", "480x640"],
                        help="HxW (96x128: the training size; auto changes sides between 144x192 and 168x224)")
    parser.add_argument("--save", type=Path, help="write each renderer's picture here as .npy")
    parser.add_argument("--summary", type=Path, help="also write the p50s here (JSON)")
    args = parser.parse_args()
    from tqdm import tqdm

    load_before = os.getloadavg()
    results = []
    for text in args.sizes:
        size = tuple(int(v) for v in text.split("x"))
        tables = {name: Table(name, size) for name in RENDERERS}
        pictures = {name: table.render() for name, table in tables.items()}  # also the warm-up frame
        times: dict[str, list[float]] = {name: [] for name in RENDERERS}
        for _ in tqdm(range(args.rounds), desc=f"render {text}", unit="round"):
            for name, table in tables.items():
                times[name] += frame_ms(table, args.frames)
        difference = np.abs(pictures["tiny"].astype(np.int16) - pictures["egl"].astype(np.int16))
        # the renderers light differently: with each channel's mean brightness matched, what is left is shape
        centred = [p.astype(np.float64) - p.mean(axis=(0, 1)) for p in (pictures["tiny"], pictures["egl"])]
        shape_difference = float(np.abs(centred[0] - centred[1]).mean())
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            for name, picture in pictures.items():
                np.save(args.save / f"{name}_{text}.npy", picture)
        p50 = {name: float(np.median(t)) for name, t in times.items()}
        p90 = {name: float(np.percentile(t, 90)) for name, t in times.items()}
        results.append((text, p50, p90, difference, shape_difference))
        for table in tables.values():
            table.close()
    load_after = os.getloadavg()
    print(f"\n{os.cpu_count()} cores, load average {load_before[0]:.1f} before and {load_after[0]:.1f} after; "
          f"{args.rounds} rounds x {args.frames} frames per renderer and size, front camera, 4 objects")
    print(f"{'size':>8} {'tiny p50 ms':>11} {'egl p50 ms':>10} {'tiny p90':>8} {'egl p90':>8} {'tiny/egl':>8} "
          f"{'mean |diff|':>11} {'same mean':>9} {'pixels > 32':>11}")
    for text, p50, p90, difference, shape_difference in results:
        print(f"{text:>8} {p50['tiny']:>11.1f} {p50['egl']:>10.1f} {p90['tiny']:>8.1f} {p90['egl']:>8.1f} "
              f"{p50['tiny'] / p50['egl']:>8.2f} {difference.mean():>11.2f} {shape_difference:>9.2f} "
              f"{100 * (difference.max(axis=2) > 32).mean():>10.1f}%")

    if args.summary:
        args.summary.write_text(json.dumps({text: {"tiny_ms": p50["tiny"], "egl_ms": p50["egl"]}
                                            for text, p50, *_ in results}, indent=1))


if __name__ == "__main__":
    main()
