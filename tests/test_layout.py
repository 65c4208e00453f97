"""The package's shape: imports point one way, between modules and between rooms (subpackages), act_node never
imports act_lab (the experiments beside it), and the sim node starts without torch. Imports are read from the source
(module level, inside functions and under TYPE_CHECKING alike: a lazy import that closes a loop is still a loop)."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "act_node"
LAB = ROOT / "act_lab"
MODULE_NAME = re.compile(r"act_lab(\.\w+)*")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, started: bool = False) -> set[str]:
    """Every module name a source imports (absolute imports, wherever they stand); with `started`, also every string
    that is a whole act_lab module name (`python -m act_lab.x` in a subprocess, importlib.import_module)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif started and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and MODULE_NAME.fullmatch(node.value):
            found.add(node.value)
    return found


def imports(*packages: Path) -> dict[str, set[str]]:
    """{module: the modules of `packages` it imports}, every module of them (default: act_node)."""
    modules = {module_name(path): path for package in packages or (PACKAGE,) for path in package.rglob("*.py")}
    return {name: {target for target in imported(path.read_text()) if target in modules and target != name}
            for name, path in modules.items()}


def test_act_node_never_imports_act_lab():
    """The product stands on its own: no module of act_node imports the lab, not even lazily inside a function,
    and none starts it as a subprocess by module name."""
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        lab = {name for name in imported(path.read_text(), started=True) if name.split(".")[0] == "act_lab"}
        if lab:
            offenders[str(path.relative_to(ROOT))] = sorted(lab)
    assert offenders == {}


def test_the_lab_import_check_sees_lazy_imports_and_module_names():
    lazy = "def f():\n    from act_lab.takeover import Takeover\n    return Takeover\n"
    assert {"act_lab.takeover", "act_lab.takeover.Takeover"} <= imported(lazy)
    assert "act_lab.cli" in imported('COMMAND = ["python", "-m", "act_lab.cli"]', started=True)
    assert "act_lab.vision" in imported("import act_lab.vision as vision")
    assert imported('"""act_lab.takeover records second attempts."""', started=True) == set()  # prose is no use


def room(module: str) -> str:
    """The room a module stands in: its subpackage (act_node.tabletop), or the top-level module itself."""
    parts = module.split(".")
    return ".".join(parts[:2])


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One loop of the graph (its nodes in order, the first again at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_imports_around_a_loop():
    assert cycle(imports(PACKAGE, LAB)) is None


def test_no_room_imports_a_room_that_imports_it_back():
    """Between subpackages and top-level modules the arrows point one way too: a lower floor never
    imports a higher one (the package's own __init__ files aside, which only name the room)."""
    rooms: dict[str, set[str]] = {}
    for module, targets in imports(PACKAGE, LAB).items():
        if module in ("act_node", "act_lab"):
            continue
        rooms.setdefault(room(module), set()).update(room(t) for t in targets if room(t) != room(module))
    assert cycle(rooms) is None


def test_the_loop_finder_finds_a_loop():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("module", ["act_node.nodes.sim_node", "act_node.tabletop.table", "act_node.stepping",
                                    "act_node.config", "act_node.episodes"])
def test_the_sim_side_imports_no_torch(module):
    """The PyBullet sim node and what it stands on load without torch (and so start in a fraction of the
    time and memory: bench/bench_startup.py)."""
    code = f"import sys, {module}; print(sorted(m for m in ('torch', 'lerobot') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"{module} imports {out.strip()}"


def test_the_layout_names_every_module_and_only_modules_that_exist():
    """docs/architecture.md's Layout: every top-level module and subpackage of both roots, and no file that is not
    there."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    block = page.split("## Layout", 1)[1].split("```")[1]
    named = set(re.findall(r"(?<![\w.])([a-z_0-9]+\.py)\b", block))  # not sim.launch.py
    existing = {path.name for root in (PACKAGE, LAB) for path in root.rglob("*.py")} | {
        path.name for path in ROOT.glob("*.py")}
    assert named - existing == set(), "the layout names files that are not there"
    for root in (PACKAGE, LAB):
        top = {path.name for path in root.glob("*.py") if path.name != "__init__.py"}
        rooms = {f"{path.name}/" for path in root.iterdir() if (path / "__init__.py").is_file()}
        assert top - named == set(), f"{root.name} modules the layout leaves out"
        assert {room for room in rooms if room not in block} == set(), f"{root.name} subpackages the layout leaves out"


def subcommands(parser) -> dict:
    """{name: its parser} of an argparse parser's subcommands."""
    import argparse

    return next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))


LAB_COMMANDS = {"video", "expert", "plannable", "curve", "recipe", "attention", "encoder", "frames", "cache",
                "act-train", "yaw"}
LAB_FLAGS = {"--takeover-from", "--takeover-latest-s", "--raw-maps", "--backbone", "--action-noise"}


def test_act_sim_has_the_users_commands_only_each_flag_with_help():
    """At most 8 subcommands, none an experiment's (those are act-lab's), no research flag, and every flag says
    what it is."""
    from act_node.cli import make_parser

    commands = subcommands(make_parser())
    assert len(commands) <= 8 and not set(commands) & LAB_COMMANDS, sorted(commands)
    unexplained = [(name, action.option_strings or action.dest) for name, command in commands.items()
                   for action in command._actions if not action.help and action.dest != "help"]
    assert unexplained == []
    flags = {flag for command in commands.values() for action in command._actions for flag in action.option_strings}
    assert not flags & LAB_FLAGS


def test_act_lab_has_the_experiments_and_records_with_the_research_flags():
    from act_lab.cli import make_parser

    commands = subcommands(make_parser())
    assert {"record", "video", "expert", "plannable", "curve", "recipe", "attention", "yaw"} <= set(commands)
    record = {flag for action in commands["record"]._actions for flag in action.option_strings}
    assert LAB_FLAGS <= record and "--environment-state" in record
