"""Frames matched by stamp and written episode by episode, without ROS (act_node.recording): the pieces the
recorder node and `act-sim bag2dataset` share."""

import numpy as np
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from act_node import so101
from act_node.episodes import EpisodeResult
from act_node.record import DatasetSpec
from act_node.recording import DemonstrationWriter, EpisodeDropped, FrameMatcher, Recorder, RecorderSettings

CAMERAS = ["front", "wrist"]
SIZE = (24, 32)
FPS = 30


def joints(k: float) -> np.ndarray:
    return np.full(6, 0.01 * k)


def image(k: int) -> np.ndarray:
    return np.full((*SIZE, 3), k % 256, np.uint8)


def tick(matcher: FrameMatcher, k: int, skip: tuple[str, ...] = (), jitter_s: float = 0.0) -> None:
    stamp = k / FPS
    matcher.add_command(stamp, joints(k) + 0.5)
    if "joints" not in skip:
        matcher.add("joints", stamp + jitter_s, joints(k))
    for camera in CAMERAS:
        if camera not in skip:
            matcher.add(camera, stamp - jitter_s, image(k))


def test_a_frame_is_the_command_with_the_joints_and_images_of_its_stamp_in_any_arrival_order():
    matcher = FrameMatcher(CAMERAS, skew_s=0.002, late_s=0.2)
    matcher.add("front", 1 / FPS, image(1))  # a part before its command
    for k in (0, 2, 1):  # out of order
        tick(matcher, k, jitter_s=0.001)
    frames = matcher.frames()
    assert [round(f.stamp_s * FPS) for f in frames] == [0, 1, 2]
    assert np.allclose(frames[1].joints_rad, joints(1)) and np.allclose(frames[1].command_rad, joints(1) + 0.5)
    assert (frames[2].images["wrist"] == 2).all() and matcher.counts.complete == 3


def test_a_frame_missing_a_part_waits_then_is_given_up_and_a_late_part_is_counted():
    matcher = FrameMatcher(CAMERAS, skew_s=0.002, late_s=0.2)
    tick(matcher, 0)
    tick(matcher, 1, skip=("wrist",))
    tick(matcher, 2)
    assert len(matcher.frames()) == 1, "frame 1 may still complete: it waits, and frame 2 behind it"
    for k in range(3, 9):  # the streams move on past late_s (6 ticks)
        tick(matcher, k)
    frames = matcher.frames()
    assert [round(f.stamp_s * FPS) for f in frames] == [2, 3, 4, 5, 6, 7, 8]
    assert matcher.counts.incomplete == {"wrist": 1}
    matcher.add("wrist", 1 / FPS, image(1))  # it comes after all
    assert matcher.counts.late["wrist"] == 1
    tick(matcher, 9, skip=("joints",))
    assert matcher.frames(flush=True) == [] and matcher.counts.incomplete == {"wrist": 1, "joints": 1}


# --- cameras on their own clocks: a command takes each camera's newest frame not from its future (beyond skew_s)
# nor older than frame_max_age of the camera's periods, once no later frame can change the pick ---------------
def free_matcher(**options) -> FrameMatcher:
    return FrameMatcher(CAMERAS, skew_s=0.005, late_s=0.5, max_age=3.0, **options)


def test_a_free_running_camera_gives_each_command_its_newest_frame_once_a_later_one_shows():
    matcher = free_matcher()
    for k in range(4):
        matcher.add_command(k / FPS, joints(k) + 0.5)
        matcher.add("joints", k / FPS, joints(k))
    for stamp in (0.004, 0.044, 0.084):  # 25 fps, 4 ms after the first command
        matcher.add("front", stamp, stamp)
    for stamp in np.arange(-0.013, 0.11, 1 / FPS):  # in phase with nothing
        matcher.add("wrist", float(stamp), float(stamp))
    frames = matcher.frames()
    # command 3 (0.1 s): the front camera's newest is 0.084, but one up to 0.105 may still come
    assert [round(f.stamp_s * FPS) for f in frames] == [0, 1, 2]
    assert [f.images["front"] for f in frames] == [0.004, 0.004, 0.044], "command 1: not the nearest, 0.044"
    matcher.add("front", 0.124, 0.124)  # each camera's frame after command 3: its picks are settled
    matcher.add("wrist", 0.12, 0.12)
    assert [f.images["front"] for f in matcher.frames()] == [0.084]
    assert matcher.counts.complete == 4 and matcher.ages.cameras["front"].max_s == pytest.approx(1 / FPS - 0.004)


def test_a_future_frame_is_refused_and_one_older_than_the_bound_too():
    matcher = free_matcher()
    for k in range(3):
        matcher.add_command(k / FPS, joints(k) + 0.5)
        matcher.add("joints", k / FPS, joints(k))
    for k in range(20):  # 30 fps, the front 12 ms after the commands: its first frame is from command 0's future
        matcher.add("front", 0.012 + k / FPS, round(12 + k * 1000 / FPS))
        matcher.add("wrist", k / FPS, k)
    assert [f.images["front"] for f in matcher.frames()] == [12, 45]
    assert matcher.counts.incomplete == {"front": 1}, "command 0 has no front frame: only one from its future"
    old = free_matcher()
    for stamp in np.arange(0.0, 0.5, 1 / FPS):  # the front camera at 30 fps until 0.5 s, then nothing
        old.add("front", float(stamp), float(stamp))
    old.add_command(0.7, joints(0))
    old.add("joints", 0.7, joints(0))
    old.add("wrist", 0.7, 0)
    assert old.frames(flush=True) == [] and old.counts.incomplete == {"front": 1}, "0.23 s is over 3 periods"


def test_lockstep_stamps_still_match_exactly():
    """frame_max_age 0 (the sim's graph): a command whose own frame is missing is given up, never given the frame
    of the tick before."""
    matcher = FrameMatcher(CAMERAS, skew_s=0.002, late_s=0.2)
    tick(matcher, 0)
    tick(matcher, 1, skip=("front",))
    for k in range(2, 10):
        tick(matcher, k)
    frames = matcher.frames()
    assert [round(f.stamp_s * FPS) for f in frames] == [0, *range(2, 10)]
    assert all((f.images["front"] == round(f.stamp_s * FPS)).all() for f in frames)
    assert matcher.counts.incomplete == {"front": 1}


def test_a_stop_at_a_stamp_writes_the_episode_once_its_commands_are_in_and_says_what_was_kept(tmp_path):
    """An arm's recording: ~/stop at a stamp; the episode is written as soon as the commands up to it have come and
    their frames settled, not after end_wait_s, and its outcome says what was kept."""
    said, now = [], [0.0]
    settings = RecorderSettings(tmp_path / "data", "local/test", use_target=False, robot_type="so101_follower",
                                image_writer_threads=0, frame_max_age=3.0)
    recorder = Recorder(settings, lambda text, error: said.append(text), lambda: now[0])
    recorder.begin("pick up the cup", 0.0)
    for k in range(-6, 40):  # the cameras ran before the start: command 0 takes their frames from before it
        if k >= 0:
            recorder.command(k / FPS, joints(k) + 0.5)
            recorder.part("joints", k / FPS, joints(k))
        for camera, fps, phase in (("front", 25, 0.011), ("wrist", 15, 0.027)):
            if (k - 1) / FPS < phase + np.floor((k / FPS - phase) * fps) / fps <= k / FPS:
                stamp = phase + np.floor((k / FPS - phase) * fps) / fps
                recorder.part(camera, stamp, image(round(stamp * 1000)))
    outcome = recorder.end("stop", at_s=30 / FPS)
    recorder.write_due()
    assert outcome.done(), "the commands up to the stop are in and their frames settled: written at once"
    kept, text = outcome.result()
    assert kept and text == "pick up the cup: episode saved: 31 frames (0 incomplete), 1 in the dataset", text
    assert recorder.end("stop", at_s=2.0) is None, "nothing runs to stop"
    recorder.close()
    assert LeRobotDataset("local/test", root=tmp_path / "data").meta.total_frames == 31


def spec(environment_state=False) -> DatasetSpec:
    return DatasetSpec.of_cameras(dict.fromkeys(CAMERAS, SIZE), FPS, robot_type="so101_follower",
                                  environment_state=environment_state)


def recorded_frames(count: int, start: int = 0):
    matcher = FrameMatcher(CAMERAS)
    for k in range(start, start + count):
        tick(matcher, k)
    return matcher.frames(flush=True)


def test_episodes_are_kept_dropped_and_discarded_and_the_dataset_loads_after_close(tmp_path):
    writer = DemonstrationWriter(spec(), "local/test", tmp_path / "data", image_writer_threads=0)
    writer.start("pick up the cup")
    for frame in recorded_frames(10):
        writer.add(frame)
    assert writer.save(seed=None) == 10
    writer.start("pick up the pen")
    for frame in recorded_frames(10):
        writer.add(frame)
    with pytest.raises(EpisodeDropped, match="3 of 13 frames incomplete"):
        writer.save(given_up=3)
    writer.start("pick up the box")
    for frame in recorded_frames(5):
        writer.add(frame)
    writer.start("pick up the key")  # a new start drops the one in progress
    for frame in recorded_frames(4):
        writer.add(frame)
    writer.close()  # the key's episode was never saved: dropped, the rest finalized
    dataset = LeRobotDataset("local/test", root=tmp_path / "data")
    assert dataset.meta.total_episodes == 1 and dataset.meta.total_frames == 10
    assert dataset.meta.robot_type == "so101_follower" and "observation.environment_state" not in dataset.features
    actions = np.asarray(dataset.hf_dataset["action"])
    assert np.allclose(actions[3], so101.to_lerobot(joints(3) + 0.5), atol=1e-4)  # LeRobot's units
    assert dataset[0]["task"] == "pick up the cup"

    again = DemonstrationWriter(spec(), "local/test", tmp_path / "data", resume=True, image_writer_threads=0)
    again.start("pick up the can")
    for frame in recorded_frames(6):
        again.add(frame)
    again.save()
    again.close()
    assert LeRobotDataset("local/test", root=tmp_path / "data").meta.total_episodes == 2


def test_a_dataset_of_the_target_refuses_a_frame_without_one(tmp_path):
    writer = DemonstrationWriter(spec(environment_state=True), "local/test", tmp_path / "data",
                                 image_writer_threads=0)
    writer.start("pick up the cup")
    frame = recorded_frames(1)[0]
    with pytest.raises(ValueError, match="no target point"):
        writer.add(frame)
    writer.add(frame, target_xy=(0.5, 0.2))
    with pytest.raises(ValueError, match="unknown requested kind 'spoon'"):
        writer.start("pick up the spoon")
        writer.add(frame, target_xy=(0.5, 0.2))
    writer.close()


def live_recorder(tmp_path, said: list[str], now: list[float]) -> Recorder:
    settings = RecorderSettings(tmp_path / "data", "local/test", use_target=False, robot_type="so101_follower",
                                image_writer_threads=0)
    return Recorder(settings, lambda text, error: said.append(text), lambda: now[0])


def feed(recorder: Recorder, ticks, command: bool = True, parts: bool = True) -> None:
    for k in ticks:
        if command:
            recorder.command(k / FPS, joints(k) + 0.5)
        if parts:
            recorder.part("joints", k / FPS, joints(k))
            for camera in CAMERAS:
                recorder.part(camera, k / FPS, image(k))


def result(seed: int, steps: int) -> EpisodeResult:
    return EpisodeResult(seed=seed, task="pick up the cup", success=True, steps=steps, sum_reward=1.0)


def test_commands_that_come_after_their_episodes_result_still_make_its_frames(tmp_path):
    """The result and the commands come on different topics: a bag of the graph held an episode's last 4
    commands after its result, and the next episode's start after them. They are still that episode's ticks."""
    said, now = [], [0.0]
    recorder = live_recorder(tmp_path, said, now)
    recorder.begin("pick up the cup", 0.0, seed=1)
    feed(recorder, range(8))
    feed(recorder, range(8, 12), command=False)
    recorder.end(result(1, 12), seed=1)
    feed(recorder, range(8, 12), parts=False)  # overtaken by the result
    recorder.begin("pick up the pen", 13 / FPS, seed=2)
    feed(recorder, range(13, 20))
    assert recorder.write_due(), "its every command is in: it ends without waiting out its end wait"
    assert said == ["pick up the cup (seed 1): episode saved: 12 frames (0 incomplete), 1 in the dataset"], said
    recorder.close()  # the pen's never ended: not kept
    dataset = LeRobotDataset("local/test", root=tmp_path / "data")
    assert dataset.meta.total_frames == 12
    assert np.allclose(np.asarray(dataset.hf_dataset["action"])[11], so101.to_lerobot(joints(11) + 0.5), atol=1e-4)


def test_a_start_that_overtakes_the_last_result_keeps_both_episodes_and_one_with_no_result_is_dropped(tmp_path):
    """The next episode's start can come before the last one's result (the recorder node once kept 1 episode of
    2): the earlier episode waits end_wait_s for its result; without one it is dropped, saying why."""
    said, now = [], [0.0]
    recorder = live_recorder(tmp_path, said, now)
    recorder.begin("pick up the cup", 0.0, seed=1)
    feed(recorder, range(10))
    recorder.begin("pick up the pen", 11 / FPS, seed=2)
    feed(recorder, range(11, 17))
    assert not recorder.write_due(), "the cup's result may still come"
    recorder.end(result(1, 10), seed=1)
    recorder.end(result(2, 6), seed=2)
    assert recorder.write_due() and recorder.write_due()
    recorder.begin("pick up the box", 20 / FPS, seed=3)
    feed(recorder, range(20, 25))
    recorder.begin("pick up the key", 26 / FPS, seed=4)
    now[0] = 4.0
    assert not recorder.write_due()
    now[0] = 5.5  # past end_wait_s
    assert recorder.write_due()
    assert said == ["pick up the cup (seed 1): episode saved: 10 frames (0 incomplete), 1 in the dataset",
                    "pick up the pen (seed 2): episode saved: 6 frames (0 incomplete), 2 in the dataset",
                    "pick up the box (seed 3): episode not kept: the next episode started and its result never came"]
    recorder.close()
    assert LeRobotDataset("local/test", root=tmp_path / "data").meta.total_frames == 16


def test_an_episodes_frames_take_its_own_target_when_the_next_ones_comes_first(tmp_path):
    """The next episode's target point can come before this episode's last frames are written (a bag of the graph
    did, under load, from its 62nd frame on): every frame of an episode takes the target of its own time."""
    said, now = [], [0.0]
    settings = RecorderSettings(tmp_path / "data", "local/test", robot_type="so101_follower", image_writer_threads=0)
    recorder = Recorder(settings, lambda text, error: said.append(text), lambda: now[0])
    recorder.begin("pick up the cup", 0.0, seed=1)
    recorder.set_target(0.0, np.array([0.55, 0.29]))
    feed(recorder, range(10))
    recorder.end(result(1, 10), seed=1)
    recorder.begin("pick up the pen", 11 / FPS, seed=2)
    recorder.set_target(11 / FPS, np.array([0.67, 0.22]))  # before the cup's frames are written
    feed(recorder, range(11, 17))
    recorder.end(result(2, 6), seed=2)
    assert recorder.write_due() and recorder.write_due(), said
    recorder.close()
    dataset = LeRobotDataset("local/test", root=tmp_path / "data")
    state = np.asarray(dataset.hf_dataset["observation.environment_state"])
    episode = np.asarray(dataset.hf_dataset["episode_index"])
    assert np.allclose(state[episode == 0, :2], [0.55, 0.29]) and np.allclose(state[episode == 1, :2], [0.67, 0.22])
