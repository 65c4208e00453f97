"""Named, versioned seed sets to evaluate on: `act-sim eval --suite pick-4` (the newest version) or `pick-4@1`.

A suite version fixes the scenes (object count, seeds) and pins a few of its episodes: the scripted expert's run on
them (target from the truth, no cameras: the simulator alone) gives the task, the outcome and the step count
written here. `act-sim eval --suite` replays the pins before it evaluates and refuses when the simulator no longer
gives them; tests/test_suites.py replays every pin. A change to the simulator, the scenes or the expert that alters
an episode therefore fails loudly, and the suite gets a new version with new pins; old versions stay listed, so a
report names exactly the episodes it ran (report.json's `suite`).

  pick-4          100 scenes of 4 objects, seeds 5000-5099
  pick-6          100 scenes of 6 objects, seeds 5000-5099
  pens-and-keys   60 scenes of 4 objects whose request is the pen or the key (the thin kinds): the first 60
                  such seeds from 6000
  cluttered       100 scenes of 8 objects (every kind), seeds 7000-7099
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pin:
    """One episode as the suite version fixes it: the expert's run on the seed's scene."""

    seed: int
    task: str
    outcome: str
    steps: int
    sum_reward: float  # to 3 decimals: the dense reward summed over the ticks moves with any change to the physics


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    objects: int
    seeds: tuple[int, ...]
    pins: tuple[Pin, ...]
    about: str

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "objects": self.objects, "episodes": len(self.seeds),
                "seeds": [self.seeds[0], self.seeds[-1]] if self.seeds == _span(self.seeds) else list(self.seeds)}


def _span(seeds: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(range(seeds[0], seeds[0] + len(seeds)))


# the pens-and-keys seeds: the first 60 from 6000 whose 4-object scene requests a pen or a key (scene sampling as
# PickObjectEnv.reset draws it; tests/test_suites.py checks every one)
PENS_AND_KEYS_1 = (
    6000, 6001, 6005, 6009, 6012, 6015, 6017, 6018, 6021, 6024, 6025, 6027, 6036, 6039, 6040, 6041, 6042, 6049, 6055,
    6059, 6062, 6070, 6072, 6090, 6095, 6100, 6104, 6106, 6108, 6115, 6118, 6120, 6121, 6137, 6151, 6156, 6159, 6169,
    6173, 6179, 6184, 6198, 6207, 6209, 6214, 6224, 6232, 6236, 6239, 6246, 6248, 6255, 6257, 6258, 6264, 6265, 6268,
    6269, 6271, 6273)

SUITES: dict[str, dict[int, Suite]] = {
    "pick-4": {1: Suite("pick-4", 1, 4, tuple(range(5000, 5100)), (
        Pin(5000, "pick up the box", "succeeded", 115, 24.588), Pin(5001, "pick up the key", "succeeded", 113, 28.695),
        Pin(5002, "pick up the pen", "succeeded", 114, 28.226), Pin(5099, "pick up the cup", "succeeded", 116, 24.689)),
        "4 objects, seeds 5000-5099")},
    "pick-6": {1: Suite("pick-6", 1, 6, tuple(range(5000, 5100)), (
        Pin(5000, "pick up the box", "succeeded", 115, 23.628), Pin(5001, "pick up the cube", "succeeded", 115, 26.153),
        Pin(5002, "pick up the toy", "succeeded", 115, 22.17), Pin(5099, "pick up the pen", "succeeded", 114, 29.343)),
        "6 objects, seeds 5000-5099")},
    "pens-and-keys": {1: Suite("pens-and-keys", 1, 4, PENS_AND_KEYS_1, (
        Pin(6000, "pick up the key", "succeeded", 113, 28.191), Pin(6001, "pick up the key", "succeeded", 113, 27.505),
        Pin(6005, "pick up the pen", "succeeded", 114, 27.997), Pin(6273, "pick up the pen", "succeeded", 114, 27.506)),
        "4 objects, the request a pen or a key: 60 seeds from 6000")},
    "cluttered": {1: Suite("cluttered", 1, 8, tuple(range(7000, 7100)), (
        Pin(7000, "pick up the cup", "succeeded", 115, 27.119), Pin(7001, "pick up the box", "succeeded", 115, 24.689),
        Pin(7002, "pick up the toy", "succeeded", 115, 26.934), Pin(7099, "pick up the key", "succeeded", 114, 24.722)),
        "8 objects (every kind), seeds 7000-7099")},
}


def suite(text: str) -> Suite:
    """`NAME` (its newest version) or `NAME@VERSION`; ValueError naming the suites and versions there are."""
    name, _, version = text.partition("@")
    listed = ", ".join(f"{n} (versions {', '.join(str(v) for v in sorted(vs))})" for n, vs in SUITES.items())
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; the suites: {listed}")
    versions = SUITES[name]
    if not version:
        return versions[max(versions)]
    try:
        number = int(version)
    except ValueError:
        raise ValueError(f"suite version {version!r} of {name} is not a number; {name} has versions "
                         f"{sorted(versions)}") from None
    if number not in versions:
        raise ValueError(f"{name} has no version {number}; it has versions {sorted(versions)} (the newest: "
                         f"{max(versions)})")
    return versions[number]


def replay_pins(chosen: Suite) -> list[str]:
    """Run the suite's pinned episodes now (the expert, target from the truth, no cameras); each way one differs
    from its pin, as a sentence (none: the simulator gives this version's episodes)."""
    from act_node.episodes import run_episode
    from act_node.tabletop.env import PickObjectEnv
    from act_node.tabletop.expert import ScriptedExpert

    env = PickObjectEnv(objects=chosen.objects, cameras=(), target_source="truth")
    problems = []
    try:
        for pin in chosen.pins:
            result = run_episode(env, ScriptedExpert(env), pin.seed)
            now = Pin(pin.seed, result.task, result.outcome, result.steps, round(result.sum_reward, 3))
            if now != pin and not (now.__dict__ | {"sum_reward": 0} == pin.__dict__ | {"sum_reward": 0}
                                   and abs(now.sum_reward - pin.sum_reward) <= 1e-3):
                problems.append(f"seed {pin.seed}: pinned {pin.task!r} {pin.outcome} in {pin.steps} steps, reward "
                                f"{pin.sum_reward}; now {now.task!r} {now.outcome} in {now.steps}, {now.sum_reward}")
    finally:
        env.close()
    return problems
