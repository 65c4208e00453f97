"""colcon builds the package as a ROS 2 user would, in a temporary workspace, plain and --symlink-install,
with the venv's colcon (requirements-dev.txt), and the install has what `ros2 run` and `ros2 launch` look
for: the executables under lib/act_node/, the launch file, URDF and models under share/act_node/, the
ament index marker and package.xml. The scripts run the venv's Python (docs/graph.md, "On a ROS 2 install")."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXECUTABLES = ("act_sim_node", "act_policy_node", "act_selector_node", "act_expert_node", "act-sim")
SHARED = ("launch/sim.launch.py", "launch/rviz/act_node.rviz", "sim/so101.urdf",
          "models/selector_lookup/model.safetensors", "package.xml")
NOT_SOURCE = (".venv", ".git", "__pycache__", "*.egg-info", "build", "install", "log", "outputs", ".pytest_cache",
              ".ruff_cache")


def pins(path: Path) -> list[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def test_each_pin_is_in_one_place_and_the_ros_install_list_has_no_ros_wheels():
    ros_install = pins(ROOT / "requirements-ros.txt")
    full = pins(ROOT / "requirements.txt")
    assert "-r requirements-ros.txt" in full
    names = lambda lines: {re.split(r"[<>=\[;!~ ]", line)[0].lower() for line in lines}  # noqa: E731
    assert not names(ros_install) & names(full), "a pin in both requirements files"
    assert not [p for p in ros_install if p.startswith("ros-")], "ROS 2 wheels would shadow a ROS install"
    assert all(p.startswith("ros-jazzy-") for p in full if p != "-r requirements-ros.txt")


@pytest.fixture(scope="module")
def colcon_env():
    pytest.importorskip("colcon_core", reason="colcon is not in this venv (requirements-dev.txt pins "
                                              "colcon-common-extensions; scripts/setup.sh installs it)")
    import setuptools

    major = int(setuptools.__version__.split(".")[0])
    assert major < 80, (f"setuptools {setuptools.__version__}: from 80 on `setup.py develop` is gone and colcon's "
                        "--symlink-install silently copies instead; scripts/setup.sh pins setuptools<80")
    # colcon from the venv, and the venv's bin first on PATH, so that the scripts it installs run this Python
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}


def build(workspace: Path, env: dict, *options: str) -> Path:
    """A workspace with this package under src/, built by colcon; its install folder for act_node."""
    shutil.copytree(ROOT, workspace / "src" / "act_node", ignore=shutil.ignore_patterns(*NOT_SOURCE), symlinks=True)
    result = subprocess.run([sys.executable, "-m", "colcon", "build", "--event-handlers", "console_cohesion+",
                             *options], cwd=workspace, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return workspace / "install" / "act_node"


def in_workspace(workspace: Path, env: dict, code: str) -> str:
    """Python run as a user's shell would after `source install/setup.bash`."""
    command = f"source install/setup.bash && python -c {code!r}"
    result = subprocess.run(["bash", "-c", command], cwd=workspace, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def check_layout(install: Path) -> None:
    for name in EXECUTABLES:
        script = install / "lib" / "act_node" / name
        assert script.is_file() and os.access(script, os.X_OK), f"missing executable {script}"
        assert script.read_text().splitlines()[0] == f"#!{sys.executable}", f"{script} runs another Python"
    for relative in SHARED:
        assert (install / "share" / "act_node" / relative).is_file(), f"missing share/act_node/{relative}"
    marker = install / "share" / "ament_index" / "resource_index" / "packages" / "act_node"
    assert marker.is_file(), "missing the ament index marker: ros2 run/launch would not find the package"


def test_colcon_build_installs_the_package_layout(tmp_path, colcon_env):
    install = build(tmp_path, colcon_env)
    check_layout(install)
    assert not (install / "share" / "act_node" / "launch" / "sim.launch.py").is_symlink()
    # the installed copy, found through the install's own hooks, finds its share folder through the ament index
    found = in_workspace(tmp_path, colcon_env, "import act_node.paths as p, act_node; "
                                               "print(act_node.__file__); print(p.share_dir())")
    module, share = found.splitlines()[-2:]
    assert Path(module).is_relative_to(install / "lib"), module
    assert Path(share) == install / "share" / "act_node"
    from packaging.requirements import Requirement

    requires = (tmp_path / "build" / "act_node" / "act_node.egg-info" / "requires.txt").read_text().split()
    same = lambda pins_: [(r.name, r.extras, r.specifier) for r in map(Requirement, pins_)]  # noqa: E731
    assert same(requires) == same(pins(ROOT / "requirements-ros.txt"))  # setup.py's install_requires


def test_colcon_symlink_install_links_back_to_the_source(tmp_path, colcon_env):
    install = build(tmp_path, colcon_env, "--symlink-install")
    check_layout(install)
    source = tmp_path / "src" / "act_node"
    launch_file = install / "share" / "act_node" / "launch" / "sim.launch.py"
    assert launch_file.is_symlink() and launch_file.resolve() == source / "launch" / "sim.launch.py"
    found = in_workspace(tmp_path, colcon_env, "import act_node; print(act_node.__file__)")
    assert Path(found.splitlines()[-1]).resolve() == source / "act_node" / "__init__.py"  # edits apply at once
