"""Runtime layer: the directories that hold a rank's offload arenas, removed however
the rank ends.

A directory is named nntile-offload-rank<R>-<host>-pid<P>-<random>: at a normal exit
its store's finalizer removes it, at an abort or a SIGTERM/SIGHUP abnormal_end does,
and what a SIGKILL left is removed by the next rank on the same host that makes one,
once process P is gone. Imports no mpi4py.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile

from . import abnormal_end

PREFIX = "nntile-offload-"
# mkdtemp's random part is letters, digits and "_": the last "-pid<P>-" is the pid
NAME = re.compile(r"^nntile-offload-rank\d+-(?P<host>.+)-pid(?P<pid>\d+)-[a-z0-9_]+$")


def make_directory(rank: int, parent=None) -> str:
    """A fresh directory for `rank`'s arenas under `parent` (default: the temp dir),
    after removing those of dead processes there."""
    parent = parent or tempfile.gettempdir()
    remove_stale(parent)
    host = host_name()
    path = tempfile.mkdtemp(prefix=f"{PREFIX}rank{rank}-{host}-pid{os.getpid()}-", dir=parent)
    abnormal_end.register(("offload directory", path), lambda: remove(path))
    return path


def remove(path: str) -> None:
    abnormal_end.unregister(("offload directory", path))
    shutil.rmtree(path, ignore_errors=True)


def remove_stale(parent: str) -> list:
    """Remove the offload directories in `parent` whose process on this host has ended
    (killed ranks leave them); -> the paths removed."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in names:
        match = NAME.match(name) if name.startswith(PREFIX) else None
        # a folder shared by several hosts: a pid is only meaningful on its own host
        if match and match["host"] == host_name() and \
                not abnormal_end.process_alive(int(match["pid"])):
            path = os.path.join(parent, name)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def host_name() -> str:
    return socket.gethostname().replace(os.sep, "_") or "host"
