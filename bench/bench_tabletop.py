"""Table-top speed, measured side by side in one run (these machines are noisy: compare the ratios).

  physics steps/s            one 1/240 s pybullet step, arm + 4 objects
  control steps/s, no images one env.step at 30 fps (8 physics steps), no camera
  camera frames/s            one TinyRenderer frame at 480x640 and 240x320, through the numpy build, and
                             through a list-returning path (the same frame handed over as a Python list
                             and converted, which is what a pybullet built without numpy forces)
  expert episodes/min        full episodes with the front and wrist cameras at 240x320

Run: .venv/bin/python bench/bench_tabletop.py [--repeat 3]
"""

import argparse
import time

import numpy as np

from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert


def rate(work, count: int) -> float:
    """Calls per second of work() over `count` calls."""
    started = time.perf_counter()
    for _ in range(count):
        work()
    return count / (time.perf_counter() - started)


def best_of(repeat: int, work, count: int) -> float:
    return max(rate(work, count) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=3)
    args = parser.parse_args()
    blind = PickObjectEnv(objects=4, cameras=(), target_source="truth")
    blind.reset(seed=0)
    physics = best_of(args.repeat, lambda: blind.world.step(1), 2400)
    hold = blind.world.joint_positions()
    from act_node import so101
    action = so101.to_lerobot(hold)
    control = best_of(args.repeat, lambda: blind.step(action), 300)
    blind.close()
    print(f"physics steps/s          {physics:9.0f}")
    print(f"control steps/s, no image {control:8.0f}   ({control / 30:.1f}x real time at 30 fps)")

    for height, width in ((480, 640), (240, 320)):
        env = PickObjectEnv(objects=4, cameras=("front",), image_size=(height, width), target_source="truth")
        env.reset(seed=0)
        camera = env.cameras[0]

        def through_list(camera=camera, env=env):
            frame = env.render_camera(camera)
            pixels = frame.flatten().tolist()  # what a list-returning build hands back
            return np.asarray(pixels, dtype=np.uint8).reshape(frame.shape)

        numpy_fps = best_of(args.repeat, lambda camera=camera, env=env: env.render_camera(camera), 20)
        list_fps = best_of(args.repeat, through_list, 20)
        print(f"camera {height}x{width}: numpy {numpy_fps:6.1f} frames/s, list path {list_fps:6.1f} frames/s, "
              f"numpy/list {numpy_fps / list_fps:.2f}x")
        env.close()

    env = PickObjectEnv(objects=4, cameras=("front", "wrist"), image_size=(240, 320), target_source="truth")
    expert = ScriptedExpert(env)
    started, steps = time.perf_counter(), 0
    for seed in range(args.episodes):
        observation, _ = env.reset(seed=seed)
        expert.reset(observation)
        done = False
        while not done:
            observation, _, terminated, truncated, _ = env.step(expert.act(observation))
            done, steps = terminated or truncated, steps + 1
    elapsed = time.perf_counter() - started
    env.close()
    per_episode = elapsed / args.episodes
    print(f"expert episodes, 2 cameras 240x320: {per_episode:.1f} s/episode ({steps / elapsed:.1f} steps/s); "
          f"50 episodes on one core {50 * per_episode / 60:.1f} min, on two processes {25 * per_episode / 60:.1f} min")


if __name__ == "__main__":
    main()
