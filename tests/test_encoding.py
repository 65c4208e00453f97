"""LeRobot's video encoder (SVT-AV1 through PyAV) raises the thread that saves an episode, and the threads it starts,
to real-time priority when the process runs as root; act_node.encoding.save_episode keeps them at their own. Each
case saves in a child process of its own, so this one never runs at real-time priority whatever happens there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from act_node.encoding import CAP_SYS_NICE, _effective, ordinary_priority, realtime_threads


def may_raise_priority() -> bool:
    try:
        return os.geteuid() == 0 and _effective(CAP_SYS_NICE)
    except OSError:
        return False


# SVT-AV1 tries only as root, and succeeds only with CAP_SYS_NICE (a container may run root without it)
as_root = pytest.mark.skipif(not may_raise_priority(), reason="not root with CAP_SYS_NICE: no real-time priority here")

SAVE = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from act_node.encoding import realtime_threads, save_episode
    from act_node.record import quiet_encoder, video_backend

    quiet_encoder()
    features = {"observation.images.front": {"dtype": "video", "shape": (48, 64, 3),
                                             "names": ["height", "width", "channels"]},
                "action": {"dtype": "float32", "shape": (2,), "names": ["a", "b"]}}
    dataset = LeRobotDataset.create(repo_id="local/encoding", fps=30, features=features, root=sys.argv[2],
                                    use_videos=True, video_backend=video_backend())
    rng = np.random.default_rng(0)
    for _ in range(20):
        dataset.add_frame({"observation.images.front": rng.integers(0, 255, (48, 64, 3), dtype=np.uint8),
                           "action": np.zeros(2, np.float32), "task": "pick up the cup"})
    if sys.argv[1] == "guarded":
        save_episode(dataset)
    else:
        dataset.save_episode(parallel_encoding=False)
    dataset.finalize()
    print("RESULT " + json.dumps({"realtime": realtime_threads(), "policy": os.sched_getscheduler(0),
                                  "frames": dataset.meta.total_frames}))
""")


def save_in_child(how: str, root) -> dict:
    done = subprocess.run([sys.executable, "-c", SAVE, how, str(root)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


@as_root
def test_lerobots_own_save_leaves_the_saving_thread_at_real_time_priority_as_root(tmp_path):
    """What the guard is for: LeRobot's save_episode, unguarded, leaves the saving thread at SCHED_FIFO 99."""
    saved = save_in_child("raw", tmp_path / "data")
    assert saved["frames"] == 20
    assert saved["policy"] == os.SCHED_FIFO, saved
    assert "FIFO 99" in saved["realtime"].values(), saved


@as_root
def test_save_episode_encodes_at_the_threads_own_priority(tmp_path):
    saved = save_in_child("guarded", tmp_path / "data")
    assert saved["frames"] == 20
    assert saved["policy"] == os.SCHED_OTHER, saved
    assert saved["realtime"] == {}, saved


@as_root
def test_the_capability_comes_back_and_a_thread_raised_inside_goes_back():
    """Inside, the thread has no CAP_SYS_NICE (a raise to real time is refused); afterwards it has it again. A thread
    raised inside anyway (here by hand, the capability put back first) leaves at the policy it entered with, and one
    that entered raised leaves as it came."""
    from act_node.encoding import _set_effective

    assert _effective(CAP_SYS_NICE)
    with ordinary_priority():
        assert not _effective(CAP_SYS_NICE)
        with pytest.raises(PermissionError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    assert _effective(CAP_SYS_NICE)
    try:
        with ordinary_priority():
            _set_effective(CAP_SYS_NICE, True)
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        with ordinary_priority():
            pass
        assert os.sched_getscheduler(0) == os.SCHED_FIFO
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    assert _effective(CAP_SYS_NICE)
    assert realtime_threads() == {}
