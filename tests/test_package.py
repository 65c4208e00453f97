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
    assert sorted(arguments["packages"]) == ["act_lab", "act_lab.attention", "act_lab.studies", "act_lab.vision",
                                             "act_node", "act_node.arm", "act_node.attention", "act_node.dds",
                                             "act_node.nodes", "act_node.perception", "act_node.tabletop"]
    assert arguments["package_data"]["act_node.dds"] == ["fastdds.xml"]  # the Fast DDS profile
    assert Path("share/act_node/launch/sim.launch.py") in installed
    assert not any(pin.startswith("ros-jazzy-") for pin in arguments["install_requires"])
    scripts = {line.split("=")[0].strip() for line in arguments["entry_points"]["console_scripts"]}
    assert {"act-lab", "act-sim", "act_sim_node", "act_policy_node", "act_selector_node",
            "act_expert_node", "act_so101_node", "act_leader_node", "act_camera_node", "act_recorder_node"} <= scripts
    for script in scripts:
        assert shutil.which(script, path=str(Path(sys.executable).parent)), f"{script} is not installed"


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert ruff, "ruff is not in the venv"
    result = subprocess.run([ruff, "check", "act_node", "act_lab", "tests", "bench", "plugins", "launch", "results"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_ros_wheels_carry_an_image_and_a_chunk_through_serialization():
    """The wheels' C type support round-trips what the project builds, byte for byte."""
    import numpy as np
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import Image
    from trajectory_msgs.msg import JointTrajectory

    from act_node.nodes import messages

    image = np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8)
    sent = messages.image_message(image, 12.5, "front_optical")
    received = deserialize_message(serialize_message(sent), Image)
    assert np.array_equal(messages.image_array(received, expected=(48, 64)), image)
    assert messages.seconds_of(received.header.stamp) == 12.5
    actions = np.linspace(-1.0, 1.0, 60).reshape(10, 6)
    chunk = deserialize_message(serialize_message(messages.chunk_message(actions, 3.0, 30)), JointTrajectory)
    stamp, back = messages.chunk_actions(chunk, 30)
    assert stamp == 3.0 and np.array_equal(back, actions)
