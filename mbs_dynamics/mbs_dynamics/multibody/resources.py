"""Files a URDF names (meshes): ``package://PKG/path``, ``file://path`` and
plain paths, resolved without ROS where needed.

``package://PKG/path`` is looked up, in order, through the ament index
(ament_index_python, where installed: a full ROS 2 install and the pip
route), the share directories of AMENT_PREFIX_PATH and of the Python
environment (``<prefix>/share``, where pip puts a package's data files;
example-robot-data from PyPI installs under
``<site-packages>/cmeel.prefix/share/example-robot-data``), the directories of
ROS_PACKAGE_PATH (ROS 1 style, ``<dir>/PKG/path``), and the caller's search
paths (``<dir>/PKG/path``, then ``<dir>/path``). A plain relative path is
looked up in the search paths (e.g. the URDF file's directory).
"""
from __future__ import annotations

import os
import site
import sys
from pathlib import Path


class ResourceNotFound(FileNotFoundError):
    """A URI that resolves to no file; the message says where it looked."""


def _share_directories() -> list[Path]:
    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    packages = [Path(p) for p in (*site.getsitepackages(), site.getusersitepackages(), *sys.path) if p]
    prefixes += [Path(sys.prefix), *(p / "cmeel.prefix" for p in packages)]
    return [prefix / "share" for prefix in prefixes]


def _package_share(package: str) -> Path | None:
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        return None
    try:
        return Path(get_package_share_directory(package))
    except (PackageNotFoundError, LookupError, ValueError, OSError):  # OSError: no AMENT_PREFIX_PATH
        return None


def resolve(uri: str, search_paths=()) -> Path:
    """The existing file `uri` names (module docstring); ResourceNotFound when
    none, naming the places tried."""
    search = [Path(p) for p in search_paths]
    tried: list[Path] = []
    if uri.startswith("file://"):
        candidates = [Path(uri[len("file://"):])]
    elif uri.startswith("package://"):
        package, _, relative = uri[len("package://"):].partition("/")
        if not package or not relative:
            raise ResourceNotFound(f"{uri}: not package://PACKAGE/PATH")
        share = _package_share(package)
        candidates = [share / relative] if share is not None else []
        candidates += [directory / package / relative for directory in _share_directories()]
        candidates += [Path(d) / package / relative
                       for d in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if d]
        candidates += [directory / package / relative for directory in search]
        candidates += [directory / relative for directory in search]
    else:
        path = Path(uri)
        candidates = [path] if path.is_absolute() else [directory / path for directory in search]
    for candidate in candidates:
        tried.append(candidate)
        if candidate.is_file():
            return candidate
    places = ", ".join(str(p) for p in tried[:6]) + (f" and {len(tried) - 6} more" if len(tried) > 6 else "")
    raise ResourceNotFound(f"{uri}: no such file (looked in {places or 'no place: give a search path'})")
