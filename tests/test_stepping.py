"""The sim's clock and episodes without ROS: lockstep readiness, holds, clamps, episode results, videos."""

import json
import math

import numpy as np
import pytest

from act_node import so101
from act_node.config import GraphConfig
from act_node.stepping import CameraSchedule, RealtimeClock, SimEpisodes, VideoWriter, executed
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert
from act_node.tabletop.planner import plan_window
from act_node.tabletop.video import Shot, write_film

TINY = dict(image_height=48, image_width=64, objects=2)


@pytest.fixture
def sim():
    episodes = SimEpisodes(GraphConfig(replan_every=10, max_steps=40, episodes=2, **TINY))
    yield episodes
    episodes.close()


def hold_chunk(sim, stamp_s, steps=20):
    """A chunk that holds the arm where it is, stamped `stamp_s`."""
    return stamp_s, np.tile(sim.joint_state()[0], (steps, 1))


def test_lockstep_waits_for_the_chunk_answering_each_replan_tick(sim):
    start = sim.start_episode()
    assert start.episode == 1 and start.seed == 0 and start.task.startswith("pick up the ")
    assert not sim.ready(), "nothing queued yet"
    sim.add_chunk(*hold_chunk(sim, sim.now_s))
    for _ in range(10):
        assert sim.ready()
        assert not sim.step().held
    # tick 10 is a re-plan tick: the old chunk still has a step for it, but the answer to tick 10 must come
    assert sim.executor.has_step(sim.now_s) and not sim.ready()
    sim.add_chunk(*hold_chunk(sim, sim.now_s - 1 / sim.fps))  # an answer to an older observation: not enough
    assert not sim.ready()
    sim.add_chunk(*hold_chunk(sim, sim.now_s))
    assert sim.ready()


def test_an_answer_to_the_last_episode_is_not_merged_into_the_next():
    """A policy still answering the last episode's final observation when the next begins: its chunk is not
    queued. Merged, its later steps would land on the new episode's ticks, and under ACT's temporal ensembling, as
    the oldest prediction for each, weigh the most (eval --ros scored 2/20 where in-process scored 15/20)."""
    sim = SimEpisodes(GraphConfig(replan_every=1, merge="ensemble", max_steps=40, episodes=2, **TINY))
    try:
        sim.start_episode()
        sim.add_chunk(*hold_chunk(sim, sim.now_s))
        sim.step()
        last = sim.now_s  # the observation the policy is answering as the episode ends
        sim.start_episode()
        assert sim.add_chunk(*hold_chunk(sim, last, steps=100)) is None
        assert sim.executor.queued_ticks() == [] and not sim.ready()
        assert sim.add_chunk(*hold_chunk(sim, sim.now_s)) == 0 and sim.ready()  # this episode's own answer
    finally:
        sim.close()


def test_a_missing_chunk_holds_the_arm_and_is_counted(sim):
    sim.start_episode()
    start = sim.joint_state()[0]
    ticks = [sim.step() for _ in range(5)]
    assert all(t.held and t.reason in ("no step queued", "chunk stale") for t in ticks)
    assert np.abs(sim.joint_state()[0] - start).max() < math.radians(2.0)
    assert sim.held_ticks == 5


def test_clamps_are_counted_in_the_episode_result(sim):
    sim.start_episode()
    here = sim.joint_state()[0]
    far = np.tile(here + np.array([1.0, 0, 0, 0, 0, 0]), (40, 1))  # 1 rad away: over the velocity bound
    sim.add_chunk(sim.now_s, far)
    tick = None
    while tick is None or not tick.done:
        tick = sim.step()
    result = tick.result
    assert result.steps == 40 and not result.success
    assert result.clamped_ticks > 0 and result.clamped_joints >= result.clamped_ticks
    # the chunk goes stale 1 s (30 ticks) after its stamp: from then on the arm holds, though steps remain
    assert sim.executor.stale_after_s == 1.0 and result.held_ticks == 40 - 31
    assert result.target_error_m is None, "no target point was given"


def test_episodes_count_down_and_report_the_target_error(sim):
    for episode in (1, 2):
        start = sim.start_episode()
        assert start.episode == episode and start.seed == episode - 1
        truth = sim.table.task.scene.target.xy
        assert not sim.target_given(start.stamp_s - 1.0, truth), "a point from before the episode is refused"
        assert sim.target_given(start.stamp_s, truth + np.array([0.03, 0.04]))
        tick = None
        while tick is None or not tick.done:
            tick = sim.step()
        assert tick.result.target_error_m == pytest.approx(0.05)
    assert sim.finished
    with pytest.raises(RuntimeError, match="no episode is running"):
        sim.step()


def test_stepping_in_radians_matches_the_gym_env_in_lerobot_units():
    """The sim node's path (radians, the executor) and the env's path (LeRobot units) are one simulation."""
    config = GraphConfig(policy="expert", replan_every=30, max_steps=60, max_velocity=1e9, target_source="truth",
                         **TINY)
    env = PickObjectEnv(**config.env_kwargs())
    observation, _ = env.reset(seed=3)
    expert = ScriptedExpert(env)
    expert.reset(observation)
    env_rewards = []
    for _ in range(60):
        observation, reward, *_ = env.step(expert.act(observation))
        env_rewards.append(reward)
    env.close()

    sim = SimEpisodes(config.replace(first_seed=3))
    sim.start_episode()
    rewards, tick = [], 0
    while tick < 60:
        if tick % 30 == 0:
            sim.add_chunk(sim.now_s, so101.from_lerobot(plan_window(expert.plan, tick, 100)))
        sim.step()
        rewards.append(sim.sum_reward)
        tick += 1
    sim.close()
    assert np.diff([0.0, *rewards]) == pytest.approx(env_rewards, abs=1e-6)


def test_an_in_process_agent_through_executed_sends_the_sim_nodes_commands_at_the_default_bound():
    """act-sim record's path (stepping.executed over the env) and the sim node's (SimEpisodes, chunks of the plan
    every 30 ticks) send the same command each tick, the velocity bound on; and the bound changes the plan."""
    config = GraphConfig(policy="expert", max_steps=150, target_source="truth", **TINY)
    env = PickObjectEnv(**config.env_kwargs())
    observation, _ = env.reset(seed=61003)
    agent = executed(env, ScriptedExpert(env), config)
    agent.reset(observation)
    sent, planned = [], []
    for tick in range(150):
        sent.append(agent.act(observation))
        planned.append(plan_window(agent.plan, tick, 1)[0])
        env.act(sent[-1])
    env.close()

    sim = SimEpisodes(config.replace(first_seed=61003))
    sim.start_episode()
    commands, done = [], False
    while not done:  # to the success (the expert's) or the step limit
        tick = len(commands)
        if tick % 30 == 0:
            sim.policy_chunk(sim.now_s, so101.from_lerobot(plan_window(agent.plan, tick, 100)))
        step = sim.step()
        commands.append(so101.to_lerobot(step.command))
        done = step.done
    sim.close()
    assert len(commands) > 60
    assert np.abs(np.array(sent[:len(commands)]) - np.array(commands)).max() < 1e-3
    assert np.abs(np.array(sent) - np.array(planned)).max() > 1.0  # the gripper's closing, spread by the bound


def test_the_episode_result_counts_the_policys_chunks_and_its_own_inference_time(sim):
    sim.start_episode()
    stamp = sim.now_s
    sim.policy_chunk(*hold_chunk(sim, stamp))
    sim.policy_chunk(*hold_chunk(sim, stamp))  # the same answer again (a re-sent observation): one call
    sim.policy_inference(0.02)
    sim.add_chunk(*hold_chunk(sim, stamp))  # a leader's pose: no call of the policy
    for _ in range(10):
        sim.step()
    sim.policy_chunk(*hold_chunk(sim, sim.now_s))
    sim.policy_inference(0.04)
    while not (tick := sim.step()).done:
        pass
    assert tick.result.policy_calls == 2 and tick.result.mean_inference_s == pytest.approx(0.03)
    sim.policy_chunk(*hold_chunk(sim, sim.now_s))  # after the episode: not its call
    sim.start_episode()
    sim.policy_chunk(*hold_chunk(sim, sim.now_s))
    while not (tick := sim.step()).done:
        pass
    assert tick.result.policy_calls == 1 and tick.result.mean_inference_s is None  # nobody said (the expert)


def test_videos_are_written_off_the_caller_thread_and_failures_reported(tmp_path):
    import threading

    written = []
    writer = VideoWriter(30, lambda path, error: written.append((path, error, threading.current_thread().name)))
    shots = [Shot({"front": np.full((32, 48, 3), k, np.uint8)}, f"t {k}") for k in range(0, 250, 25)]
    writer.submit(shots, tmp_path / "one.mp4", "succeeded")
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where a folder should be")
    writer.submit(shots, blocker / "two.mp4", "failed")
    writer.close()
    assert [(p.name, e is None, t) for p, e, t in written] == [("one.mp4", True, "video_writer"),
                                                               ("two.mp4", False, "video_writer")]
    assert (tmp_path / "one.mp4").stat().st_size > 500 and (tmp_path / "one.png").is_file()


def test_a_film_draws_each_camera_at_least_480_wide_and_captions_the_outcome(tmp_path):
    """The policy's small cameras (96x128) are enlarged for a person to watch; the picture holds the start, the
    middle and the end, the end under the outcome's caption (pixels differ from the running caption's)."""
    import imageio.v2 as imageio
    from PIL import Image

    rng = np.random.default_rng(0)
    shots = [Shot({"front": rng.integers(0, 255, (96, 128, 3), np.uint8),
                   "wrist": rng.integers(0, 255, (96, 128, 3), np.uint8)}, f"episode 1: pick up the pen  t {k}")
             for k in range(7)]
    video, picture = write_film(shots, "episode 1: pick up the pen  succeeded after 7 steps", tmp_path / "e.mp4", 30)
    with imageio.get_reader(video) as reader:
        frames = [frame for frame in reader]
    assert len(frames) == 7 + 30  # every shot, then the outcome held a second
    assert frames[0].shape[1] >= 2 * 480 and frames[0].shape[0] >= 4 * 96  # each 96x128 camera drawn 4x
    drawn = np.asarray(Image.open(picture))
    height = drawn.shape[0] // 3  # the picture's moments are unpadded; the video pads to even sizes
    assert drawn.shape[1] == frames[0].shape[1] and frames[0].shape[0] - height in (0, 1)
    strip = slice(4 * 96, height)  # the caption under the cameras
    assert not np.array_equal(drawn[strip], drawn[2 * height:][strip])  # the end says the outcome
    with pytest.raises(ValueError, match="at least one shot"):
        write_film([], "none", tmp_path / "none.mp4", 30)


# --- the realtime clock and the camera schedule, no ROS ---------------------------------------------------------
def test_the_realtime_clock_makes_up_an_overrun_tick_and_restarts_after_a_stall():
    clock = RealtimeClock(fps=10, catch_up=3)  # a 0.1 s period; tick k due at 0.1 k s, half a period early
    assert clock.due(100.0, running=True) == 1  # the first call starts the schedule: one tick
    assert clock.due(100.1, running=True) == 1
    assert clock.due(100.12, running=True) == 0  # not yet the next period
    assert clock.due(100.42, running=True) == 3  # a callback 0.2 s late: the ticks it cost follow
    assert clock.due(100.9, running=True) == 4  # 5 due, at most 1 + catch_up in one call
    assert clock.due(100.92, running=True) == 1  # the one left over
    assert clock.due(103.0, running=True) == 1  # more than a second behind: from now, one tick
    assert clock.due(103.1, running=True) == 1
    assert clock.due(103.12, running=False) == 1  # no episode running: the schedule starts again
    assert clock.due(103.15, running=True) == 0


def schedule(clock="lockstep", camera_every=0, filming=False, replan_every=10):
    return CameraSchedule(GraphConfig(clock=clock, camera_every=camera_every, **TINY), replan_every, filming)


CAMERAS = ["front", "wrist"]
EVERYONE = lambda camera: True  # noqa: E731
NOBODY = lambda camera: False  # noqa: E731


def test_lockstep_renders_the_cameras_someone_listens_to_at_the_replan_ticks_only():
    cameras = schedule()
    due = [tick for tick in range(5, 40) if cameras.due(tick, 5, "episode 1", CAMERAS, EVERYONE)]
    assert due == [5, 15, 25, 35]
    assert cameras.due(15, 5, "episode 1", CAMERAS, lambda camera: camera == "wrist") == ["wrist"]
    assert cameras.due(15, 5, "episode 1", CAMERAS, NOBODY) == []
    assert schedule(camera_every=1).due(7, 5, "episode 1", CAMERAS, EVERYONE) == CAMERAS  # for RViz, a recorder
    assert schedule(filming=True).due(7, 5, "episode 1", CAMERAS, NOBODY) == CAMERAS  # a video films every tick


def test_realtime_renders_at_the_start_after_each_chunk_and_after_a_second_without_one():
    cameras = schedule(clock="realtime")
    assert cameras.due(1, 1, "episode 1", CAMERAS, EVERYONE) == CAMERAS  # the episode's first tick
    assert cameras.due(2, 1, "episode 1", CAMERAS, EVERYONE) == []  # the policy is busy with that image
    cameras.chunk_arrived(9)
    assert cameras.due(10, 1, "episode 1", CAMERAS, EVERYONE) == CAMERAS  # its chunk is out: it is free
    assert [t for t in range(11, 60) if cameras.due(t, 1, "episode 1", CAMERAS, EVERYONE)] == [40]  # 30 ticks on
    cameras.chunk_arrived(45)
    cameras.chunk_arrived(95)  # a slow policy: 50 ticks between chunks, so patience is 100 ticks
    assert cameras.due(96, 1, "episode 1", CAMERAS, EVERYONE) == CAMERAS
    assert [t for t in range(97, 200) if cameras.due(t, 1, "episode 1", CAMERAS, EVERYONE)] == [196]
    assert cameras.due(197, 197, "episode 2", CAMERAS, EVERYONE) == CAMERAS  # a new episode renders at once


def test_episode_films_write_each_result_and_start_each_episode_afresh(tmp_path):
    """The sim node's episodes on disk: the result's JSON where result_path says, frames only while filming, and an
    episode cut short by a new one leaves none of its frames to the next film."""
    from act_node.episodes import EpisodeResult
    from act_node.stepping import EpisodeFilms, EpisodeStart, result_path

    start = EpisodeStart(1, 7, "pick up the cup", 0.0, [])
    films = EpisodeFilms(GraphConfig(video_dir=str(tmp_path), record_video=False, **TINY))
    films.shot({}, start, 0.0)
    assert not films.filming and films.frames == []
    result = EpisodeResult(7, "pick up the cup", True, 90, 12.0, episode=1)
    films.ended(result)
    assert EpisodeResult.from_dict(json.loads(result_path(tmp_path, result).read_text())) == result
    filming = EpisodeFilms(GraphConfig(video_dir=str(tmp_path), **TINY))
    filming.shot({}, start, 0.5)
    assert filming.frames[0].text == "episode 1: pick up the cup  t 0.50 s"
    filming.started()
    assert filming.frames == []
    filming.close()
    assert EpisodeFilms(GraphConfig(**TINY)).video_dir is None
