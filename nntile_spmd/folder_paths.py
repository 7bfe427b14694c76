"""A file named inside a folder's own index (a checkpoint manifest's "file", a sharded
Hugging Face model's weight_map) must stay in that folder: an absolute name or one
that climbs out with ".." would read a file the folder's author chose anywhere on the
machine. The check is on the name as written (links inside the folder are the
folder owner's, as in a Hub cache whose files link to its blobs). Standard library
only: used by train/ and models/ alike.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath


class OutsideFolder(ValueError):
    """A file name that leaves the folder it was read from."""


def inside(folder, name, what: str) -> Path:
    """folder / name, refusing a name that is not a relative path within `folder`;
    `what` says where the name was read (e.g. "manifest.json's tile w@0,0")."""
    if not isinstance(name, str) or not name.strip():
        raise OutsideFolder(f"{what}: file name {name!r} is not a file name")
    parts = PurePath(name).parts
    if os.path.isabs(name) or ".." in parts or "\0" in name or name.startswith("~"):
        raise OutsideFolder(f"{what}: file name {name!r} leaves the folder {folder} "
                            "(only names of files inside it are read)")
    return Path(folder) / name
