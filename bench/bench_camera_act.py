"""What a camera ACT costs a tick, against the shipped image-less one, side by side in one run, one and two threads.

  observe      PickObjectEnv.observe(): both 96x128 cameras rendered (the renderer the checkpoint's data was
               drawn with) and the observation built, as at each tick the policy answers (the image-less
               checkpoint takes no image: its yaw read, once an episode, is bench_yaw.py's)
  chunk        ChunkPolicy asked for one chunk (reset first, so every call infers): the camera checkpoint's
               ResNet-18 on both images and its transformer, against the shipped checkpoint's transformer alone

With ACT's temporal ensembling the policy answers every tick, so observe + chunk is what one tick costs; at the
sim's 30 fps a tick has 33.3 ms. Weights do not change the time, so any checkpoint of the camera recipe will do
(the default: the newest of outputs/recipe_cam). Stop a training run meanwhile (kill -STOP, kill -CONT after):
beside one, both are timed slow.

Run: .venv/bin/python bench/bench_camera_act.py [--checkpoint DIR] [--repeat 20]
"""
import argparse
import sys
from pathlib import Path

import torch

from act_lab.curve import checkpoints
from act_node.checkpoints import checkpoint_cameras, trained_renderer
from act_node.config import FPS, shipped_checkpoint
from act_node.envs import make_env
from act_node.policy import ChunkPolicy, FeatureSpec

sys.path.insert(0, str(Path(__file__).parent))
from bench_yaw import mean_s  # noqa: E402

RECIPE_RUN = Path("outputs/recipe_cam/act")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, default=None, help="a camera ACT's pretrained_model folder "
                        f"(default: the newest checkpoint of {RECIPE_RUN})")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2000)
    args = parser.parse_args()
    camera_model = args.checkpoint or checkpoints(RECIPE_RUN)[-1][1]
    cameras = checkpoint_cameras(camera_model)
    if not cameras:
        raise SystemExit(f"bench_camera_act: {camera_model} takes no camera images")
    size = next(iter(cameras.values()))
    camera_policy = ChunkPolicy.load(camera_model, expect=FeatureSpec(cameras=cameras))
    image_less = ChunkPolicy.load(shipped_checkpoint(), expect=FeatureSpec(cameras={}))
    rows = []
    for policy, name in ((camera_policy, "camera ACT"), (image_less, "image-less (shipped)")):
        env = make_env(objects=4, cameras=tuple(cameras), image_size=size,
                       renderer=trained_renderer(camera_model) or "tiny", environment_layout=policy.environment_layout)
        observation, _ = env.reset(seed=args.seed)

        def chunk(policy=policy, observation=observation, task=env.task):
            policy.reset()
            policy(observation, task)

        for threads in (1, 2):
            torch.set_num_threads(threads)
            observe_s = mean_s(env.observe, args.repeat) if name == "camera ACT" else 0.0
            chunk_s = mean_s(chunk, args.repeat)
            rows.append((name, threads, observe_s, chunk_s))
        env.close()
    tick_ms = 1000 / FPS
    print(f"camera ACT: {camera_model} ({', '.join(cameras)} at {size[0]}x{size[1]})")
    image_less_chunk = {threads: chunk_s for name, threads, _, chunk_s in rows if name != "camera ACT"}
    for name, threads, observe_s, chunk_s in rows:
        tick = observe_s + chunk_s
        observed = f"observe {observe_s * 1e3:5.1f} ms" if observe_s else "observe   -     "  # no image to draw
        print(f"{name:22s} {threads} thread(s): {observed}, chunk {chunk_s * 1e3:5.1f} ms "
              f"({chunk_s / image_less_chunk[threads]:.1f}x the image-less chunk); answering every tick: "
              f"{tick * 1e3:5.1f} ms of a 30 fps tick's {tick_ms:.1f} ({tick * 1e3 / tick_ms:.2f})")

if __name__ == "__main__":
    main()
