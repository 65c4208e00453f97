"""The package as ROS 2 and pip see it: package.xml, setup.py's data files and scripts, lint."""

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from unittest import mock

import setuptools

ROOT = Path(__file__).resolve().parents[1]
MESSAGE_PACKAGES = {"sensor_msgs", "trajectory_msgs", "geometry_msgs", "std_msgs", "std_srvs",
                    "visualization_msgs", "rosgraph_msgs"}


def setup_arguments() -> dict:
    with mock.patch.object(setuptools, "setup") as setup:
        source = (ROOT / "setup.py").read_text()
        exec(compile(source, str(ROOT / "setup.py"), "exec"), {"__file__": str(ROOT / "setup.py"), "__name__": "x"})
    return setup.call_args.kwargs


def test_package_xml_is_format_3_with_the_ros_dependencies():
    root = ElementTree.parse(ROOT / "package.xml").getroot()
    assert root.tag == "package" and root.attrib["format"] == "3"
    assert root.findtext("name") == "act_node"
    depends = {element.text for element in root.findall("exec_depend")}
    assert {"rclpy"} | MESSAGE_PACKAGES <= depends
    assert root.find("export/build_type").text == "ament_python"


def test_setup_installs_the_ament_marker_and_the_data_folders():
    arguments = setup_arguments()
    installed = {Path(folder) / Path(file).name for folder, files in arguments["data_files"] for file in files}
    assert Path("share/ament_index/resource_index/packages/act_node") in installed
    assert Path("share/act_node/package.xml") in installed
    assert Path("share/act_node/sim/so101.urdf") in installed
    assert Path("share/act_node/models/selector_lookup/model.safetensors") in installed
    assert Path("share/act_node/models/selector_lookup/README.md") in installed
    assert sorted(arguments["packages"]) == ["act_node", "act_node.arm", "act_node.nodes", "act_node.tabletop"]
    assert Path("share/act_node/launch/sim.launch.py") in installed
    assert not any(pin.startswith("ros-jazzy-") for pin in arguments["install_requires"])
    scripts = {line.split("=")[0].strip() for line in arguments["entry_points"]["console_scripts"]}
    assert {"act-attention", "act-sim", "act_sim_node", "act_policy_node", "act_selector_node",
            "act_expert_node", "act_so101_node", "act_camera_node"} <= scripts
    for script in scripts:
        assert shutil.which(script, path=str(Path(sys.executable).parent)), f"{script} is not installed"


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert ruff, "ruff is not in the venv"
    result = subprocess.run([ruff, "check", "act_node", "tests", "bench", "plugins", "launch"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_ros_wheels_import():
    import rclpy
    from sensor_msgs.msg import Image
    from trajectory_msgs.msg import JointTrajectory

    assert rclpy.ok() is False  # imported, not initialised
    assert Image().encoding == "" and JointTrajectory().points == []
