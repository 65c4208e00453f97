"""The one parameter table (act_node.settings): every launch argument, node parameter and act-sim graph flag is made
from it, with its default, description and range, and a node that needs another says why there. Fails for a launch
argument, a node's declaration or a graph flag made anywhere else."""

import ast
import dataclasses
from pathlib import Path

import pytest

from act_node import settings
from act_node.config import GraphConfig
from act_node.settings import NODES, OVERRIDES, SETTINGS, check_argument, launch_arguments, node_parameters

NODES_DIR = Path(settings.__file__).parent / "nodes"
# each node module and the name it runs under (its table entry)
MODULES = {"sim_node": "act_sim", "arm_node": "act_so101", "camera_node": "act_camera", "policy_node": "act_policy",
           "expert_node": "act_expert", "selector_node": "act_selector", "leader_node": "act_leader",
           "recorder_node": "act_recorder", "scene_reader_node": "act_scene_reader"}


def test_every_launch_argument_is_one_setting_of_the_table():
    from act_node.nodes.graph import LAUNCH_ARGUMENTS

    assert LAUNCH_ARGUMENTS == launch_arguments(tuple(g for g in settings.GROUPS if g != "viewer"))
    fields = {f.name: f for f in dataclasses.fields(GraphConfig) if "description" in f.metadata}
    graph = {s.name for s in SETTINGS.values() if s.group == "graph"}
    assert set(fields) == graph, "GraphConfig's launch arguments are the table's graph group, no more, no fewer"
    for name, field in fields.items():
        entry = SETTINGS[name]
        limits = {key: getattr(entry, key) for key in ("low", "high", "choices") if getattr(entry, key) is not None}
        assert field.default == entry.default and dict(field.metadata) == {"description": entry.description,
                                                                           **limits}, name
    launch_files = Path(settings.__file__).parents[1] / "launch"
    for path in launch_files.glob("*.launch.py"):
        tree = ast.parse(path.read_text())
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            if getattr(call.func, "id", None) == "DeclareLaunchArgument":  # only over the table's arguments
                assert isinstance(call.args[0], ast.Name) and call.args[0].id == "name", f"{path.name}: a literal"


def test_every_launch_argument_is_checked_by_its_type_choices_and_range():
    from act_node.nodes.graph import describe

    for name, (default, _) in launch_arguments().items():
        check_argument(name, default)  # every default passes its own check
    for name, entry in SETTINGS.items():
        if not entry.launch or entry.group in ("graph", "viewer"):
            continue
        bad = {bool: "maybe", int: "1.5", float: "fast", str: None}[type(entry.default)]
        if entry.choices:
            bad = "bogus"
        if bad is not None:
            with pytest.raises(ValueError, match=name):
                describe(**{"policy": "expert", name: bad})
    with pytest.raises(ValueError, match="frame_max_age"):
        describe(policy="expert", frame_max_age="-1")


def test_overrides_name_a_node_and_a_setting_it_declares_and_say_why():
    for (node, name), override in OVERRIDES.items():
        assert name in NODES[node].values() or name in NODES[node], f"{node} declares no {name}"
        assert len(override.reason) > 20, f"{node}.{name}: an override says why"
    for node in NODES:
        names = [entry.name for entry in node_parameters(node)]
        assert len(names) == len(set(names)), node


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_node_declares_only_from_the_table(module):
    """Statically: a node declares through declare_node under its own name, never declare_parameter or a literal
    Spec, and reads no parameter the table does not give it."""
    tree = ast.parse((NODES_DIR / f"{module}.py").read_text())
    node = MODULES[module]
    calls = _calls(tree, "declare_node")
    assert [c.args[1].value for c in calls] == [node], f"{module} declares through declare_node(self, {node!r})"
    for forbidden in ("declare_parameter", "declare_parameters", "declare", "declare_all", "Spec"):
        assert not _calls(tree, forbidden), f"{module} calls {forbidden}: its parameters come from the table"
    read = {c.args[0].value for c in _calls(tree, "get_parameter") if isinstance(c.args[0], ast.Constant)}
    assert read <= set(NODES[node]) | {"use_sim_time"}, f"{module} reads parameters the table does not give it"


def test_the_graph_gives_each_node_only_parameters_it_declares(tmp_path):
    """Every parameter the launch sets on a node (sim, so101, teleoperation, recording) is one the table gives that
    node: no launch argument reaches a node by a name of its own."""
    from act_node.nodes.graph import describe
    from act_node.perception.scene import CameraCalibration, ReaderConfig, SceneReader, network

    module_node = {f"act_node.nodes.{module}": node for module, node in MODULES.items()}
    SceneReader(network(8), ReaderConfig(width=8)).save(tmp_path / "reader")
    CameraCalibration.of_sim(96, 128).save(tmp_path / "front.json")
    reading = {"scene": "cameras", "scene_reader": str(tmp_path / "reader")}
    graphs = [describe(policy="expert", **reading),
              describe(policy="expert", robot="so101", port="/dev/null", camera_devices="0,1", task="pick up the cup",
                       camera_calibration=str(tmp_path / "front.json"), **reading),
describe(policy="expert"), describe(policy="expert", target_source="truth", clock="realtime"),
              describe(policy="expert", record=str(tmp_path / "data"), teleop="leader", leader_port="/dev/null"),
              describe(policy="expert", robot="so101", port="/dev/null", camera_devices="0,1",
                       record=str(tmp_path / "data2"))]
    seen = set()
    for nodes in graphs:
        for spec in nodes:
            node = module_node[spec.module]
            seen.add(node)
            assert set(spec.parameters) - {"use_sim_time"} <= set(NODES[node]), (node, sorted(spec.parameters))
    assert seen >= {"act_sim", "act_so101", "act_camera", "act_expert", "act_selector", "act_leader", "act_recorder",
                    "act_scene_reader"}


def test_act_sims_graph_flags_come_from_the_table():
    """act-sim eval's and record's flags that set a graph setting (GraphConfig's: the table's group "graph") are made
    by cli.graph_flag: the table's help, type, choices and (unless the command says otherwise and why) default."""
    import argparse

    from act_node.cli import make_parser

    # flags that set a graph setting under another name
    aliases = {"height": "image_height", "width": "image_width", "target": "target_source",
               "n_action_steps": "replan_every"}
    # flags named like a setting that are not it
    not_settings = {("record", "episodes"): "episodes to keep: the expert's successes, not the graph's episodes"}
    subparsers = next(a for a in make_parser()._actions if isinstance(a, argparse._SubParsersAction))
    checked = 0
    for command in ("eval", "record"):
        for action in subparsers.choices[command]._actions:
            setting = aliases.get(action.dest, action.dest)
            if setting not in SETTINGS or SETTINGS[setting].group != "graph" or (command, action.dest) in not_settings:
                continue
            entry = SETTINGS[setting]
            assert getattr(action, "setting", None) == setting, f"act-sim {command} {action.option_strings[0]}"
            assert action.help.startswith(entry.description) and action.choices == entry.choices
            checked += 1
    assert checked >= 15


def test_the_nodes_declare_the_tables_parameters_in_process(ros):
    """Started in process, the sim, expert and selector nodes hold exactly the table's parameters with its
    descriptions and defaults (the sim's computed ones as their overrides say)."""
    from conftest import THREADED_RENDERER, retire
    from rclpy.parameter import Parameter

    from act_node.nodes.expert_node import ExpertNode
    from act_node.nodes.selector_node import SelectorNode
    from act_node.nodes.sim_node import SimNode

    started = [SimNode(parameter_overrides=[Parameter("renderer", value=THREADED_RENDERER),
                                            Parameter("autostart", value=False), Parameter("objects", value=2),
                                            Parameter("image_height", value=48), Parameter("image_width", value=64)]),
               ExpertNode(), SelectorNode()]
    try:
        for node in started:
            name = node.get_name()
            rclpys = ("use_sim_time", "start_type_description_service")  # rclpy declares these on every node
            declared = {p: node.describe_parameter(p) for p in node._parameters if p not in rclpys}
            table = {entry.name: entry for entry in node_parameters(name)}
            assert set(declared) == set(table), name
            for parameter, entry in table.items():
                assert declared[parameter].description.startswith(entry.description), (name, parameter)
                if entry.default is not settings.COMPUTED and parameter not in ("renderer", "autostart", "objects",
                                                                                 "image_height", "image_width"):
                    value = node.get_parameter(parameter).value
                    expected = list(entry.default) if isinstance(entry.default, tuple) else entry.default
                    assert value == expected, (name, parameter)
    finally:
        retire(ros, *started)
