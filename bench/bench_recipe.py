"""What each speed lever of the ACT recipe buys: training steps/s of variants side by side, one torch thread
each (two runs share these 2 cores), the same synthetic batches, interleaved rounds (compare ratios).

  recipe            act_node/training.py: two cameras at 96x128, VAE off, 2 encoder layers, dim 256
  +vae +4 layers    the VAE on and 4 encoder layers (LeRobot's ACT structure at this width)
  120x160           the earlier image size
  64x80             smaller images
  wrist only        one camera

Compute only (forward + backward + AdamW; bench_policy.py times data loading): speed does not depend on
what the weights learned, so the weights are untrained.
Run: .venv/bin/python bench/bench_recipe.py [--steps 10] [--rounds 2]
"""

import argparse
import statistics
import time

import torch

from act_node.config import CHUNK_SIZE
from act_node.observation import environment_state_names
from act_node.training import ACT_ARGUMENTS, act_config

VARIANTS = {
    "recipe": dict(cameras=("front", "wrist"), size=(96, 128)),
    "+vae +4 layers": dict(cameras=("front", "wrist"), size=(96, 128), use_vae=True, n_encoder_layers=4),
    "120x160": dict(cameras=("front", "wrist"), size=(120, 160)),
    "64x80": dict(cameras=("front", "wrist"), size=(64, 80)),
    "wrist only": dict(cameras=("wrist",), size=(96, 128)),
}


def build(cameras, size, **overrides):
    from lerobot.configs import FeatureType, PolicyFeature
    from lerobot.policies.act.modeling_act import ACTPolicy

    inputs = {f"observation.images.{c}": PolicyFeature(FeatureType.VISUAL, (3, *size)) for c in cameras}
    inputs["observation.state"] = PolicyFeature(FeatureType.STATE, (6,))
    inputs["observation.environment_state"] = PolicyFeature(FeatureType.ENV, (len(environment_state_names()),))
    outputs = {"action": PolicyFeature(FeatureType.ACTION, (6,))}
    policy = ACTPolicy(act_config(inputs, outputs, **overrides))
    policy.train()
    batch_size = int(ACT_ARGUMENTS["batch_size"])
    generator = torch.Generator().manual_seed(0)
    batch = {key: torch.rand(batch_size, *feature.shape, generator=generator) for key, feature in inputs.items()}
    batch["action"] = torch.rand(batch_size, CHUNK_SIZE, 6, generator=generator)
    batch["action_is_pad"] = torch.zeros(batch_size, CHUNK_SIZE, dtype=torch.bool)
    return policy, torch.optim.AdamW(policy.parameters(), lr=1e-4), batch


def steps_per_second(policy, optimizer, batch, steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        loss, _ = policy.forward(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per variant per round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    built = {}
    for name, variant in VARIANTS.items():
        variant = dict(variant)
        built[name] = build(variant.pop("cameras"), variant.pop("size"), **variant)
        steps_per_second(*built[name], steps=2)  # warm up
    rates = {name: [] for name in VARIANTS}
    for _ in range(args.rounds):  # interleaved: a load change hits every variant alike
        for name in VARIANTS:
            rates[name].append(steps_per_second(*built[name], steps=args.steps))
    base = statistics.median(rates["recipe"])
    print(f"{'variant':<16} {'steps/s':>8} {'vs recipe':>10} {'parameters':>11}   "
          f"(batch {ACT_ARGUMENTS['batch_size']}, one thread, {args.rounds} x {args.steps} steps)")
    for name, values in rates.items():
        rate = statistics.median(values)
        parameters = sum(p.numel() for p in built[name][0].parameters())
        print(f"{name:<16} {rate:>8.2f} {rate / base:>9.2f}x {parameters / 1e6:>10.1f}M")


if __name__ == "__main__":
    main()
