"""What an image-less ACT training step costs at two widths, in float32 and under bfloat16 autocast, side by side.

The recipe's loop (act_lab.vision.act_train.Run.train_step: a sampled batch of the dataset, ACT's forward, its
loss, AdamW) for four settings, interleaved round by round so the machine's noise falls on all four alike:

  dim 256 / ffn 1024 fp32   the recipe's ACT (models/act_target_tool_yaw's)
  dim 256 / ffn 1024 bf16   the same under torch.autocast(bfloat16): weights, optimizer and checkpoints float32
  dim 128 / ffn 512 fp32    half the widths
  dim 128 / ffn 512 bf16

It prints steps a second and each one's ratio to the first. The dataset is any the yaw recipe records (its
`DIR/data`, 15 numbers of environment state; `act-lab recipe --kind yaw --stage record --out DIR`). Stop a
training run meanwhile (kill -STOP, kill -CONT after): beside one, every number is slow.

Run: .venv/bin/python bench/bench_act_train.py --dataset DIR/data [--steps 20] [--rounds 3] [--threads 2]
"""
import argparse
import tempfile
import time
from pathlib import Path

import torch

from act_lab.vision.act_train import Run, Settings

SETTINGS = {
    "dim 256 / ffn 1024 fp32": {},
    "dim 256 / ffn 1024 bf16": {"bf16": True},
    "dim 128 / ffn 512 fp32": {"dim_model": 128, "dim_feedforward": 512},
    "dim 128 / ffn 512 bf16": {"dim_model": 128, "dim_feedforward": 512, "bf16": True},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, required=True, help="a yaw recipe's DIR/data")
    parser.add_argument("--steps", type=int, default=20, help="steps a setting is timed for in each round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seconds = {name: 0.0 for name in SETTINGS}
    with tempfile.TemporaryDirectory() as scratch:
        runs = {name: Run(args.dataset, None, None, Path(scratch) / str(k),
                          Settings(steps=10**9, batch_size=args.batch_size, use_cameras=False, **more))
                for k, (name, more) in enumerate(SETTINGS.items())}
        for run in runs.values():
            run.policy.train()
            for _ in range(3):  # warm up: the allocator, oneDNN's kernels
                run.train_step()
        for _ in range(args.rounds):
            for name, run in runs.items():
                started = time.perf_counter()
                for _ in range(args.steps):
                    run.train_step()
                seconds[name] += time.perf_counter() - started
    total = args.rounds * args.steps
    first = total / seconds[next(iter(SETTINGS))]
    print(f"batch {args.batch_size}, {args.threads} threads, {total} steps each over {args.rounds} interleaved rounds")
    for name in SETTINGS:
        rate = total / seconds[name]
        print(f"  {name:<26} {rate:6.2f} steps/s   {rate / first:5.2f}x")


if __name__ == "__main__":
    main()
