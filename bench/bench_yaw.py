"""What the yaw reader costs beside the ACT it feeds, measured side by side in one run, one and two threads.

  yaw read   YawReader.read: both cameras' 96x128 images through the frozen ResNet-18 and the head (once an
             episode, on the run's first observation)
  chunk      the shipped ACT (models/act_target_tool_yaw) asked for one chunk (reset first: every call infers)

Run: .venv/bin/python bench/bench_yaw.py [--repeat 30]
"""
import argparse
import time

import numpy as np
import torch

from act_node.config import shipped_checkpoint
from act_node.perception.yaw import READER_CAMERAS, READER_IMAGE_SIZE, YawReader
from act_node.policy import ChunkPolicy, FeatureSpec


def mean_s(call, repeat: int) -> float:
    for _ in range(3):
        call()
    started = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - started) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    reader = YawReader.load()
    policy = ChunkPolicy.load(shipped_checkpoint(), expect=FeatureSpec(cameras={}, env_state_dim=15))
    rng = np.random.default_rng(0)
    images = {c: rng.integers(0, 256, (*READER_IMAGE_SIZE, 3), dtype=np.uint8) for c in READER_CAMERAS}
    state = np.r_[0.5, 0.3, np.eye(8)[3], 0.1, 0.1, 0.2, 1.0, 0.0].astype(np.float32)
    observation = {"agent_pos": np.zeros(6, np.float32), "pixels": {}, "environment_state": state}

    def chunk():
        policy.reset()
        policy(observation, "pick up the pen")

    for threads in (1, 2):
        torch.set_num_threads(threads)
        read_s = mean_s(lambda: reader.read(images, "pen"), args.repeat)
        chunk_s = mean_s(chunk, args.repeat)
        print(f"{threads} thread(s): yaw read {read_s * 1e3:.1f} ms, chunk {chunk_s * 1e3:.1f} ms, "
              f"read / chunk {read_s / chunk_s:.1f}x (the read once an episode, a chunk every 30 ticks)")


if __name__ == "__main__":
    main()
