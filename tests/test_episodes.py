"""The one episode runner and its one result record, with the scripted expert on a small table-top."""

import json

import numpy as np
import pytest

from act_node.episodes import ChunkAgent, EpisodeResult, EpisodeStopped, policy_agent, run_episode
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert

TINY = dict(objects=2, image_size=(24, 32), cameras=("front",))


@pytest.fixture
def env():
    env = PickObjectEnv(**TINY)
    yield env
    env.close()


def counting_observe(env) -> list[int]:
    """The env's steps at which the cameras rendered, from now on."""
    renders, observe = [], env.observe
    env.observe = lambda: renders.append(env.steps) or observe()
    return renders


def test_the_expert_renders_once_and_the_same_episode_comes_whoever_watches(env):
    renders = counting_observe(env)
    quiet = run_episode(env, ScriptedExpert(env), seed=3)
    assert renders == [0], "the expert reads the observation only at the reset"
    steps = []
    watched = run_episode(env, ScriptedExpert(env), seed=3, on_step=lambda obs, action: steps.append(action))
    assert quiet.success and quiet == watched
    assert len(steps) == quiet.steps and renders == [0, 0, *range(1, quiet.steps + 1)]


def test_frames_after_the_success_are_stepped_and_judged(env):
    plain = run_episode(env, ScriptedExpert(env), seed=3)
    seen = []
    longer = run_episode(env, ScriptedExpert(env), seed=3, after_success=12,
                         on_step=lambda obs, action: seen.append(obs["agent_pos"]))
    assert longer.steps == plain.steps and len(seen) == plain.steps + 12  # the steps count the episode only
    assert longer.held_after_success is True and plain.held_after_success is None
    assert longer.sum_reward == plain.sum_reward


def test_a_stop_ends_the_episode_with_nothing_counted(env):
    calls = []
    with pytest.raises(EpisodeStopped, match="seed 3 stopped after 5 steps"):
        run_episode(env, ScriptedExpert(env), seed=3, stop=lambda: calls.append(1) or len(calls) > 5)


class Replay:
    """A chunk policy that answers every observation with the expert's next `size` actions."""

    def __init__(self, expert):
        self.expert, self.asked = expert, []

    def reset(self):
        self.asked.clear()

    def __call__(self, observation, task):
        self.asked.append(task)
        chunk = self.expert.chunk(observation, 100)
        return chunk, 0.01


def test_a_chunk_agent_asks_again_once_its_n_action_steps_are_executed(env):
    expert = ScriptedExpert(env)
    policy = Replay(expert)
    agent = ChunkAgent(env, policy, n_action_steps=30)
    original_reset = agent.reset
    agent.reset = lambda observation: (expert.reset(observation), original_reset(observation))
    renders = counting_observe(env)
    result = run_episode(env, agent, seed=3)
    # the replayed chunks restart the plan at each call: the arm does not reach as far as the expert's own
    assert result.policy_calls == len(policy.asked) == -(-result.steps // 30)
    assert renders == [0, *range(30, result.steps + 1, 30)]  # the last one too, as lerobot-eval observes it
    assert result.mean_inference_s == pytest.approx(0.01)
    assert set(policy.asked) == {env.task}


class Counting:
    """A chunk policy whose k-th chunk is k everywhere (chunk size 4, 6 joints)."""

    chunk_size = 4

    def __init__(self):
        self.calls = 0

    def reset(self):
        self.calls = 0

    def __call__(self, observation, task):
        self.calls += 1
        return np.full((4, 6), float(self.calls - 1), dtype=np.float32), 0.0


def test_temporal_ensembling_averages_every_chunks_prediction_for_a_step(env):
    agent = policy_agent(env, Counting(), 1, ensemble_coeff=0.5)
    observation, _ = env.reset(seed=1)
    agent.reset(observation)
    actions = [agent.act(observation)[0] for _ in range(6)]
    w = np.exp(-0.5 * np.arange(4))  # the oldest prediction weighs most (LeRobot's w_i = exp(-coeff * i))
    assert actions[0] == pytest.approx(0.0)
    assert actions[1] == pytest.approx((0 * w[0] + 1 * w[1]) / w[:2].sum())
    assert actions[2] == pytest.approx((0 * w[0] + 1 * w[1] + 2 * w[2]) / w[:3].sum())
    # from the chunk size on, the last four chunks' predictions for the step
    assert actions[5] == pytest.approx((2 * w[0] + 3 * w[1] + 4 * w[2] + 5 * w[3]) / w.sum())
    assert agent.needs_observation() and agent.calls == 6


def test_average_merges_each_chunk_half_and_half_with_the_queued_steps(env):
    """merge average, the graph's third rule, in process too: asked every 2 ticks, each new chunk's step averaged
    with what the previous chunks left queued for it."""
    agent = policy_agent(env, Counting(), 2, merge="average")
    observation, _ = env.reset(seed=1)
    agent.reset(observation)
    actions = [agent.act(observation)[0] for _ in range(6)]
    # chunk k is k everywhere, 4 steps long: tick 2 has chunk 0's step 2 (0) and chunk 1's step 0 (1) -> 0.5
    assert actions == pytest.approx([0.0, 0.0, 0.5, 0.5, 1.5, 1.5])
    assert agent.calls == 3 and agent.merge == "average"


def test_the_record_reads_back_and_names_a_wrong_key():
    result = EpisodeResult(7, "pick up the pen", True, 120, 40.5, 1.0, lifted=["pen"])
    assert EpisodeResult.from_dict(json.loads(result.to_json())) == result
    with pytest.raises(ValueError, match=r"unknown keys \['return'\]"):
        EpisodeResult.from_dict({**result.to_dict(), "return": 3.0})
    with pytest.raises(ValueError, match="lacks a key"):
        EpisodeResult.from_dict({"seed": 1})
    assert np.isfinite(result.sum_reward)


def test_an_agent_takes_the_merge_rule_it_is_given(env):
    """policy_agent ensembles given a coefficient, replaces without one, and runs any rule at any cadence, as the
    graph's executor does."""
    policy = Counting()
    assert policy_agent(env, policy, 1, ensemble_coeff=0.01).merge == "ensemble"
    assert policy_agent(env, policy, 30).merge == "replace"
    assert policy_agent(env, policy, 30, ensemble_coeff=0.01).merge == "ensemble"
    with pytest.raises(ValueError, match="merge rule must be one of"):
        policy_agent(env, policy, 30, merge="median")
