"""PickObjectEnv as every command builds it: with the yaw reader given where its environment_state layout needs it.

The table-top (act_node.tabletop) stands below the camera readers (act_node.perception, which read what the
table-top draws), so the env does not load the reader itself: `target_tool_yaw` takes one as `yaw_reader`, and this is
where the package's commands (act-sim eval, record, the Ray shards, the LeRobot plugin) hand it models/yaw_reader.
"""

from __future__ import annotations

from act_node.grasp import planned_grasp
from act_node.table_frame import GRASP_LAYOUTS, YAW_LAYOUTS
from act_node.tabletop.env import PickObjectEnv

_READER = None  # models/yaw_reader, loaded once a process
_SCENE_READERS: dict = {}  # scene readers by folder, loaded once a process


def yaw_reader():
    """models/yaw_reader, loaded on first use and kept for the process (its backbone is 45 MB)."""
    global _READER
    if _READER is None:
        from act_node.perception.yaw import YawReader

        _READER = YawReader.load()
    return _READER


def scene_reader(folder: str = ""):
    """A scene reader (models/scene_reader for ''), loaded on first use and kept for the process."""
    if folder not in _SCENE_READERS:
        from act_node.perception.scene import SceneReader

        _SCENE_READERS[folder] = SceneReader.load(folder or None)
    return _SCENE_READERS[folder]


def make_env(**kwargs) -> PickObjectEnv:
    """PickObjectEnv(**kwargs), given models/yaw_reader when the layout reads the yaw (target_tool_yaw and
    target_tool_yaw_grasp) and none is given, act_node.grasp's planner for target_tool_yaw_grasp, and the scene
    reader (`scene_reader_model`, a folder; '': models/scene_reader) when scene is 'cameras'."""
    if kwargs.get("environment_layout") in YAW_LAYOUTS and kwargs.get("yaw_reader") is None:
        kwargs["yaw_reader"] = yaw_reader()
    if kwargs.get("environment_layout") in GRASP_LAYOUTS and kwargs.get("grasp_planner") is None:
        kwargs["grasp_planner"] = planned_grasp
    folder = kwargs.pop("scene_reader_model", "") or ""
    if kwargs.get("scene") == "cameras" and kwargs.get("scene_reader") is None:
        kwargs["scene_reader"] = scene_reader(folder)
    return PickObjectEnv(**kwargs)
