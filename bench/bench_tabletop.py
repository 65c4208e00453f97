"""Table-top speed, measured side by side in one run (these machines are noisy: compare the ratios).

  physics steps/s             one 1/240 s pybullet step, arm + 4 objects
  control steps/s, no images  one TableTop.step at 30 fps (8 physics steps), no camera rendered
  camera frames/s             one TinyRenderer frame of the front camera at 480x640 and at 240x320
  expert episodes             whole expert episodes with the front and wrist cameras at 240x320, in one
                              process and in two processes at once (measured, both over the same seeds)

Run: .venv/bin/python bench/bench_tabletop.py [--repeat 3] [--episodes 4]
"""

import argparse
import time
from multiprocessing import get_context

import numpy as np

from act_node.tabletop.cameras import camera_specs
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert
from act_node.tabletop.table import TableTop

FPS = 30


def rate(work, count: int) -> float:
    """Calls per second of work() over `count` calls."""
    started = time.perf_counter()
    for _ in range(count):
        work()
    return count / (time.perf_counter() - started)


def best_of(repeat: int, work, count: int) -> float:
    return max(rate(work, count) for _ in range(repeat))


def expert_steps(seeds: list[int]) -> int:
    """Run whole expert episodes (2 cameras at 240x320); returns the steps taken."""
    env = PickObjectEnv(objects=4, cameras=("front", "wrist"), image_size=(240, 320), target_source="truth")
    expert, steps = ScriptedExpert(env), 0
    for seed in seeds:
        observation, _ = env.reset(seed=seed)
        expert.reset(observation)
        done = False
        while not done:
            observation, _, terminated, truncated, _ = env.step(expert.act(observation))
            done, steps = terminated or truncated, steps + 1
    env.close()
    return steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=4, help="expert episodes (even: split over 2 processes)")
    args = parser.parse_args()
    table = TableTop(camera_specs((), 240, 320), FPS)
    table.reset(np.random.default_rng(0), 4)
    physics = best_of(args.repeat, lambda: table.world.step(1), 2400)
    hold = table.robot.joint_positions()
    control = best_of(args.repeat, lambda: table.step(hold), 300)
    table.close()
    print(f"physics steps/s             {physics:9.0f}")
    print(f"control steps/s, no images  {control:9.0f}   ({control / FPS:.1f}x real time at {FPS} fps)")

    frames = {}
    for height, width in ((480, 640), (240, 320)):
        table = TableTop(camera_specs(("front",), height, width), FPS)
        table.reset(np.random.default_rng(0), 4)
        frames[height, width] = best_of(args.repeat, table.rig.render, 20)
        table.close()
    big, small = frames[480, 640], frames[240, 320]
    print(f"camera frames/s (TinyRenderer, one core): 480x640 {big:.1f} ({1000 / big:.0f} ms), 240x320 {small:.1f} "
          f"({1000 / small:.0f} ms); 240x320 / 480x640 {small / big:.2f}x")

    seeds = list(range(args.episodes))
    started = time.perf_counter()
    one_steps = expert_steps(seeds)
    one = time.perf_counter() - started
    started = time.perf_counter()
    with get_context("spawn").Pool(2) as pool:
        two_steps = sum(pool.map(expert_steps, [seeds[0::2], seeds[1::2]]))
    two = time.perf_counter() - started
    assert one_steps == two_steps, "the same seeds must take the same steps"
    print(f"expert episodes, 2 cameras 240x320, {len(seeds)} episodes ({one_steps} steps): one process "
          f"{one:.1f} s ({one_steps / one:.1f} steps/s), two processes {two:.1f} s ({two_steps / two:.1f} steps/s, "
          f"process start included); two / one {one / two:.2f}x")


if __name__ == "__main__":
    main()
