"""rosbag2 bags (MCAP or sqlite3, as `ros2 bag record` writes them) to LeRobotDatasets, with a pure-Python reader
(`rosbags`): no ROS install, no rclpy. `act-sim bag2dataset BAG --out DIR`.

The bag's messages go, in the order they were logged, through the same act_node.recording.Recorder the recorder
node runs (the same frame matching by stamp, the same dataset writer), so a bag of a graph converts to the dataset
the recorder node would have written of it. Episodes come from the bag's own /episode/start and /episode/result
(the sim), or from time ranges given as START:END in seconds of the messages' header stamps, with a task text.

Topics read (under `namespace`): act/joint_command, joint_states, camera/<name>/image_raw, target/point,
episode/start, episode/result.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from act_node.nodes.messages import (
    MessageError,
    episode_result,
    episode_start,
    image_array,
    image_stamp,
    stamped_joint_positions,
    target_point,
    topic_names,
)
from act_node.recording import Recorder, RecorderSettings


@dataclass(frozen=True)
class Summary:
    root: Path
    saved: int
    dropped: int
    episodes: int  # in the dataset now
    messages: int
    unreadable: int  # messages that did not parse (each named once in `problems`)
    problems: list[str]


def messages(bag: Path, topics: dict[str, str]) -> Iterator[tuple[str, float, object]]:
    """(what, log time s, message) in log order; images stay CDR bytes (act_node's own image reader takes them),
    the rest deserialized into objects with the ROS messages' field names."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    if not Path(bag).exists():
        raise FileNotFoundError(f"no bag at {bag}")
    typestore = get_typestore(Stores.ROS2_JAZZY)
    what_of = {topic: what for what, topic in topics.items()}
    with Reader(bag) as reader:
        connections = [c for c in reader.connections if c.topic in what_of]
        if not any(what_of[c.topic] == "command" for c in connections):
            present = sorted({c.topic for c in reader.connections})
            raise ValueError(f"bag {bag} has no {topics['command']} (the applied commands a dataset's actions are): "
                             f"its topics are {present}")
        for connection, stamp_ns, data in reader.messages(connections=connections):
            what = what_of[connection.topic]
            message = data if what.startswith("camera:") else typestore.deserialize_cdr(data, connection.msgtype)
            yield what, stamp_ns * 1e-9, message


def bag_to_dataset(bag: str | Path, settings: RecorderSettings, namespace: str = "",
                   ranges: list[tuple[float, float]] | None = None, task: str = "") -> Summary:
    """Convert the bag into the dataset at settings.root; episodes from the bag's episode topics, or `ranges`
    (header-stamp seconds) with `task`."""
    if ranges and not task:
        raise ValueError("episodes from time ranges need a task text (--task 'pick up the cup')")
    now = [0.0]
    said: list[str] = []
    recorder = Recorder(settings, lambda text, error: said.append(text), lambda: now[0])
    topics = topic_names(namespace, settings.cameras)
    pending = sorted(ranges or [])
    current: tuple[float, float] | None = None
    count, unreadable, problems = 0, 0, []
    try:
        for what, log_s, message in tqdm(messages(Path(bag), topics), desc="reading the bag", unit="message"):
            now[0], count = log_s, count + 1
            try:
                if what == "command":
                    stamp, positions = stamped_joint_positions(message)
                    if ranges is not None:
                        current = _by_range(recorder, pending, current, stamp, task)
                    recorder.command(stamp, positions)
                elif what == "joints":
                    recorder.part("joints", *stamped_joint_positions(message))
                elif what.startswith("camera:"):
                    recorder.part(what.split(":", 1)[1], image_stamp(message), image_array(message))
                elif what == "target":
                    recorder.set_target(*target_point(message))
                elif what == "start" and ranges is None:
                    start_s, info = episode_start(message)
                    seed = info.get("seed")
                    recorder.begin(str(info.get("task", "")), start_s, None if seed is None else int(seed),
                                   info.get("renderer"))
                elif what == "result" and ranges is None:
                    result = episode_result(message)
                    recorder.end(result, result.seed)
            except MessageError as error:
                unreadable += 1
                if len(problems) < 20:
                    problems.append(f"{topics.get(what, what)}: {error}")
            while recorder.write_due():
                pass
        if current is not None:
            recorder.end("stop")
    finally:
        recorder.close()
    for text in said:
        tqdm.write(text)
    episodes = recorder.writer.episodes if recorder.writer is not None else 0
    return Summary(Path(settings.root), recorder.saved, recorder.dropped, episodes, count, unreadable, problems)


def _by_range(recorder: Recorder, pending: list[tuple[float, float]], current, stamp: float, task: str):
    """Begin and end the episodes of time ranges as the commands' stamps pass their edges; the range running."""
    if current is not None and stamp > current[1]:
        recorder.end("stop")
        current = None
    while current is None and pending and stamp > pending[0][1]:
        pending.pop(0)  # a range the commands skipped over entirely
    if current is None and pending and stamp >= pending[0][0]:
        current = pending.pop(0)
        recorder.begin(task, current[0])
    return current
