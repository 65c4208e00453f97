"""Where the package's data (sim/, models/, launch/) lives: the source tree, a colcon install or a pip install."""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE = "act_node"


def share_dir() -> Path:
    """The folder holding sim/, models/ and launch/."""
    source = Path(__file__).resolve().parents[1]
    if (source / "package.xml").is_file():  # a checkout or an editable install
        return source
    try:  # a colcon workspace
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE))
    except (ImportError, LookupError):
        pass
    installed = Path(sys.prefix) / "share" / PACKAGE  # pip's data_files
    if installed.is_dir():
        return installed
    raise FileNotFoundError(f"cannot find the {PACKAGE} share folder (looked in {source} and {installed})")


def models_dir() -> Path:
    return share_dir() / "models"
