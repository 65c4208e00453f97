"""Many seeded episodes of one checkpoint in one process, side by side: one batched policy call a tick.

    seeds -> slots (one env each; a slot takes the next seed as soon as its episode ends)
    each tick:  the slots whose agent needs a chunk (all of them under ACT's temporal ensembling)
                -> their observations stacked -> preprocessor -> ACT -> postprocessor    (ChunkPolicy.chunks)
                -> (rows, chunk_size, 6) split back, each row to its own slot's agent: its own
                   chunk executor (episodes.ChunkAgent: replace, ACT's temporal ensembling, average)
                -> every slot's Rollout.step(): env.act, then the next observation only where it is read
    -> each episode's EpisodeResult (and its frames, if filmed) as it ends

Each episode runs as run_episode runs it alone (episodes.Rollout: the same stepping, ending and record); only the
policy's arithmetic is a batch's, which may differ from a lone call's in the last bits of a float. Every call is
padded to at least MIN_ROWS rows (copies of its last observation): CPU matrix kernels pick another blocking for
the smallest batches, and from there a row's result does not depend on how many rows ride with it, so an episode
comes out the same whichever slot, batch or worker ran it. On the development machine's CPU (one torch thread) an
ACT of the shipped size gives a row the same bits at 1, 2-3, 4-5 and 6-64 rows, four classes (dim 512: 1, 2-5,
6-64); 4 rows put a lone call in another class than a batch of 6 or more, and --workers 2 then changed 22 of 60
episodes of a suite against --workers 1 (tests/test_lockstep.py checks the classes with models/act_target_tool).
The cameras render only when the policy reads images or
the episode is filmed: a checkpoint without cameras (the shipped target_tool_yaw ones: the yaw is read once, at the
reset, by the env's own reader) steps physics only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

import numpy as np

from act_node.episodes import EpisodeResult, Rollout, policy_agent
from act_node.tabletop.env import PickObjectEnv

MIN_ROWS = 8  # a batched call is padded to this many rows (see the module's docstring)
SLOTS = 16  # episodes side by side in one process, by default (act-sim eval --batch)


class _ChunkShare:
    """One slot's share of the tick's batched call, handed to its agent as a policy would hand it a chunk."""

    def __init__(self, chunk_size: int):
        self.chunk_size = chunk_size
        self.given: tuple[np.ndarray, float] | None = None

    def reset(self) -> None:
        self.given = None

    def __call__(self, observation: dict, task: str) -> tuple[np.ndarray, float]:
        if self.given is None:
            raise RuntimeError("the agent asked for a chunk the batched call did not compute")
        given, self.given = self.given, None
        return given


def lockstep(envs: list[PickObjectEnv], policy, seeds: Iterable[int], n_action_steps: int,
             ensemble_coeff: float | None = None, film: Iterable[int] = (), merge: str | None = None
             ) -> Iterator[tuple[EpisodeResult, list[np.ndarray] | None]]:
    """The episodes of `seeds`, len(envs) at a time side by side, of `policy` (act_node.policy.ChunkPolicy) run as
    lerobot-eval runs it (chunks of `n_action_steps`, or ACT's temporal ensembling given `ensemble_coeff`; `merge`:
    any of act_node.chunks.MERGE_RULES, episodes.policy_agent). Yields
    (result, captioned frames for the seeds in `film`, else None) as each episode ends."""
    if not envs:
        raise ValueError("lockstep needs at least one env")
    queue, film = deque(seeds), set(film)
    pixels = bool(policy.camera_names)  # the policy reads images: every observation renders
    shares = [_ChunkShare(policy.chunk_size) for _ in envs]
    agents = [policy_agent(env, share, n_action_steps, ensemble_coeff, merge) for env, share in zip(envs, shares)]
    slots: list[Rollout | None] = [None] * len(envs)
    ended: list[tuple[EpisodeResult, list[np.ndarray] | None]] = []  # judged before the slot's env is reset

    def fill(slot: int) -> None:
        slots[slot] = None
        while queue and slots[slot] is None:
            seed = queue.popleft()
            rollout = Rollout(envs[slot], agents[slot], seed, frames=[] if seed in film else None, pixels=pixels)
            if rollout.finished:  # it ended at its reset (an agent that could not plan)
                ended.append((rollout.result(), rollout.frames))
            else:
                slots[slot] = rollout

    for slot in range(len(envs)):
        fill(slot)
    while True:
        yield from ended
        ended.clear()
        live = [slot for slot, rollout in enumerate(slots) if rollout is not None]
        if not live:
            return
        asking = [slot for slot in live if agents[slot].needs_observation()]
        if asking:
            observations = [slots[slot].observation for slot in asking]
            if not pixels:  # a filmed episode's or a reset's images are not the policy's: every row alike
                observations = [{**observation, "pixels": {}} for observation in observations]
            tasks = [envs[slot].task for slot in asking]
            padding = max(0, MIN_ROWS - len(asking))
            chunks, seconds = policy.chunks(observations + observations[-1:] * padding, tasks + tasks[-1:] * padding)
            for row, slot in enumerate(asking):
                shares[slot].given = (chunks[row], seconds / len(asking))
        for slot in live:
            rollout = slots[slot]
            rollout.step()
            if rollout.finished:
                ended.append((rollout.result(), rollout.frames))
                fill(slot)
