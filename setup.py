"""act_node: ament_python package that also installs with pip (`pip install .`).

`colcon build --symlink-install` runs a symlink to this file from build/act_node/, next to symlinks of the
data files only: whatever else it reads is found beside the real file (HERE resolves the link), and the
data_files paths stay relative, which colcon mirrors into the build folder.
"""

from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "act_node"
HERE = Path(__file__).resolve().parent  # the source folder, also from a symlink


def tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries that install `folder` under share/act_node/, keeping its layout."""
    entries: dict[str, list[str]] = {}
    for path in sorted((HERE / folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(HERE)
            entries.setdefault(str(Path("share", PACKAGE, relative.parent)), []).append(str(relative))
    return list(entries.items())


def requirements() -> list[str]:
    """The PyPI pins (requirements-ros.txt): a ROS 2 install or the ros-jazzy-* wheels provide the rest."""
    lines = (HERE / "requirements-ros.txt").read_text().splitlines()
    return [pin for pin in (line.split("#")[0].strip() for line in lines) if pin]


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*", "act_lab", "act_lab.*"]),  # act_lab: the experiments
    package_data={f"{PACKAGE}.dds": ["fastdds.xml"]},  # the Fast DDS profile, found next to act_node/dds
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *tree("launch"),
        *tree("sim"),
        *tree("models"),
    ],
    install_requires=requirements(),
    python_requires=">=3.12",
    zip_safe=False,
    maintainer="act_node developers",
    maintainer_email="act-node@example.invalid",
    description="LeRobot ACT in a closed loop with a PyBullet table-top and an SO-101 arm, over ROS 2",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "act-sim = act_node.cli:main",
            "act-lab = act_lab.cli:main",
            "act_sim_node = act_node.nodes.sim_node:main",
            "act_policy_node = act_node.nodes.policy_node:main",
            "act_selector_node = act_node.nodes.selector_node:main",
            "act_scene_reader_node = act_node.nodes.scene_reader_node:main",
            "act_expert_node = act_node.nodes.expert_node:main",
            "act_so101_node = act_node.nodes.arm_node:main",
            "act_leader_node = act_node.nodes.leader_node:main",
            "act_camera_node = act_node.nodes.camera_node:main",
            "act_recorder_node = act_node.nodes.recorder_node:main",
        ],
    },
)
