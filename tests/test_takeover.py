"""Second attempts: a policy acts, the expert takes over where it goes wrong, and only the expert's part is recorded."""

import json

import numpy as np
import pytest

from act_lab.takeover import Takeover, TakeoverAgent
from act_node.config import GraphConfig
from act_node.episodes import run_episode
from act_node.record import SEEDS_FILE, SeedRecord, TooFewEpisodes, record
from act_node.stepping import ExecutedAgent, chunk_executor
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert

SEEDS = (11, 12, 13)


@pytest.fixture(scope="module")
def env():
    env = PickObjectEnv(objects=2, cameras=(), target_source="truth")
    yield env
    env.close()


class HoldStill:
    """A policy that holds the pose it starts in, the jaws as they are (or, with `close_at`, closing them
    there): it never reaches anything."""

    def __init__(self, close_at: int | None = None):
        self.close_at, self.tick, self.start = close_at, 0, None

    def reset(self, observation):
        self.tick, self.start = 0, np.array(observation["agent_pos"], dtype=np.float32)

    def needs_observation(self):
        return False

    def act(self, observation):
        action = self.start.copy()
        action[-1] = 60.0 if self.close_at is None or self.tick < self.close_at else 0.0
        self.tick += 1
        return action


def test_the_expert_itself_is_never_taken_over(env):
    """The gate is calibrated on the expert: its own grasp is up LIFT_PROGRESS_M before MISS_S has passed."""
    for seed in SEEDS:
        agent = TakeoverAgent(env, ScriptedExpert(env), ScriptedExpert(env))
        result = run_episode(env, agent, seed, after_success=30)
        assert result.success and result.held_after_success, seed
        assert agent.closed_at is not None and agent.took_over_at is None, (seed, agent.reason)


def test_a_policy_that_never_reaches_is_taken_over_in_time_and_the_expert_picks_from_there(env):
    agent = TakeoverAgent(env, HoldStill(), ScriptedExpert(env), latest_tick=40)
    result = run_episode(env, agent, SEEDS[0])
    assert (agent.took_over_at, agent.reason) == (40, "too slow")
    assert result.success and result.steps > 40


def test_jaws_that_open_again_restart_the_count(env):
    agent = TakeoverAgent(env, ScriptedExpert(env), ScriptedExpert(env), miss_ticks=20)
    for tick, command in enumerate([60.0, 50.0, 50.0, 58.0, 40.0]):
        agent.tick = tick
        agent.note_gripper(command)
    assert agent.closed_at == 4  # the first close (tick 1) was opened again at tick 3


def test_jaws_closed_on_nothing_are_a_missed_grasp(env):
    agent = TakeoverAgent(env, HoldStill(close_at=5), ScriptedExpert(env), miss_ticks=20)
    result = run_episode(env, agent, SEEDS[1])
    assert agent.closed_at == 5
    assert (agent.took_over_at, agent.reason) == (25, "missed grasp")
    assert result.success  # the expert opens the jaws again on its way to the object


class ExpertFirst(Takeover):
    """A takeover whose first actor is the expert itself: it succeeds, so there is never an expert part."""

    def agent(self, env, expert):
        return TakeoverAgent(env, ScriptedExpert(env), expert)


def test_a_seed_the_policy_succeeds_on_is_skipped(env, tmp_path):
    with pytest.raises(TooFewEpisodes, match="the policy's own successes: \\[11, 12\\]") as caught:
        record(env, "local/takeover", tmp_path / "data", episodes=1, first_seed=11, max_attempts=2,
               after_success=60, takeover=ExpertFirst(None, "the expert"))  # past the latest tick to take over
    assert caught.value.summary.recorded == 0 and caught.value.summary.policy_successes == [11, 12]


def test_only_the_experts_part_is_recorded_and_where_it_took_over_is_kept(env, tiny_state_checkpoint, tmp_path):
    takeover = Takeover.load(tiny_state_checkpoint, env, latest_s=1.5)
    summary = record(env, "local/takeover", tmp_path / "data", episodes=1, first_seed=11, after_success=10,
                     takeover=takeover)
    kept = json.loads((tmp_path / "data" / SEEDS_FILE).read_text())
    taken = kept["episode_takeover"][0]
    assert taken["policy"] == str(tiny_state_checkpoint) and taken["reason"] in ("too slow", "missed grasp")
    seed = kept["episode_seeds"][0]
    # the same seed again, nothing recorded: the episode's frames are the expert's ticks from the takeover on
    # through the executor act-sim record sends the actions through (the velocity bound: the action sent)
    agent, expert_ticks = takeover.agent(env, ScriptedExpert(env)), []
    executor = chunk_executor(GraphConfig(policy="expert", fps=env.fps), env.table.robot.lower, env.table.robot.upper)
    executed = ExecutedAgent(env, agent, executor)
    again = run_episode(env, executed, seed, after_success=10, on_step=lambda observation, action: expert_ticks.append(
        (observation["agent_pos"].copy(), action.copy())) if agent.expert_acting else None)
    assert agent.took_over_at == taken["tick"] > 0
    assert summary.frames == again.steps - taken["tick"] + 10 == len(expert_ticks)

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    frames = LeRobotDataset("local/takeover", root=tmp_path / "data").hf_dataset
    states, actions = np.asarray(frames["observation.state"]), np.asarray(frames["action"])
    assert np.allclose(states, [state for state, _ in expert_ticks], atol=1e-4)  # from the takeover's tick on
    assert np.allclose(actions, [action for _, action in expert_ticks], atol=1e-4)  # the expert's actions
    env.reset(seed=seed)
    assert not np.allclose(states[0], env.observe()["agent_pos"], atol=0.5)  # not from reset


def test_the_seed_file_keeps_the_takeovers_and_reads_an_older_one(tmp_path):
    seeds = SeedRecord([], 0, 4)
    seeds.add(3, 0.0, {"policy": "p", "tick": 120, "reason": "missed grasp"})
    seeds.add(4)
    seeds.write(tmp_path)
    again = SeedRecord.read(tmp_path)
    assert again.episode_takeover == [{"policy": "p", "tick": 120, "reason": "missed grasp"}, None]
    content = json.loads((tmp_path / SEEDS_FILE).read_text())
    del content["episode_takeover"]
    (tmp_path / SEEDS_FILE).write_text(json.dumps(content))
    assert SeedRecord.read(tmp_path).episode_takeover == [None, None]


@pytest.mark.parametrize("arguments, message", [
    (["--takeover-latest-s", "3"], "--takeover-latest-s says when the expert takes over"),
    (["--takeover-from", "x", "--takeover-latest-s", "0"], "--takeover-latest-s must be a time > 0 s, got 0.0"),
    (["--takeover-from", "x", "--takeover-latest-s", "nan"], "--takeover-latest-s must be a time > 0 s, got nan"),
    (["--takeover-from", "x", "--takeover-latest-s", "0.01"], "is 0 ticks: it must be at least one"),
    (["--takeover-from", "x", "--takeover-latest-s", "9"], "leave the expert's plan its 126 .* so at most 174"),
    (["--takeover-from", "no/such/checkpoint"], "--takeover-from no/such/checkpoint: "),
    (["--takeover-from", "x", "--action-noise", "1"], "record them in separate runs"),
    (["--takeover-from", "x", "--ray"], "--takeover-from records in this process"),
])
def test_act_lab_record_refuses_a_bad_takeover(arguments, message, tmp_path, capsys):
    from act_lab.cli import main

    with pytest.raises(SystemExit, match=message):
        main(["record", "--cameras", "front", "--height", "48", "--width", "64", "--objects", "2",
              "--root", str(tmp_path / "data"), *arguments])
    assert not (tmp_path / "data").exists()
