"""Files that a job writes into a folder named by an environment variable (the plan
cache, the flight records): the folder must be this user's alone, and a file is
written under a fresh random name, then renamed over its final name.

A folder that another user owns, or that group or others may write (a shared
`/tmp`-like folder, mode 1777), lets them plant files: a pickle read as a plan, a
symlink named like a temporary file that redirects the write onto a file of the
victim's. Such a folder is refused, saying why. The temporary file comes from
tempfile.mkstemp (O_CREAT | O_EXCL, mode 0600, an unguessable name), so no link
planted beforehand is ever followed, and os.replace renames over a link, never
through it. Standard library only: imported by plan/ and runtime/ alike.
"""

from __future__ import annotations

import os
import stat
import tempfile


class UnsafeFolder(Exception):
    """The folder cannot hold this user's private files; the text says why."""


def folder_problem(path) -> str | None:
    """Why `path` (an existing folder) is not private to this user, or None."""
    link = os.lstat(path)
    if stat.S_ISLNK(link.st_mode) and link.st_uid != os.geteuid():
        return (f"is a link owned by another user (uid {link.st_uid}), who could point it "
                "at a folder of their own")
    info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        return "is a file, not a folder"
    if info.st_uid != os.geteuid():
        return (f"is owned by another user (uid {info.st_uid}, this process runs as uid "
                f"{os.geteuid()}), who could plant files in it")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"can be written by group or others (mode {stat.S_IMODE(info.st_mode):o}), "
                "who could plant files in it")
    return None


def private_folder(path, what: str) -> str:
    """Make `path` (mode 0700) if it is missing; raise UnsafeFolder naming `what` and
    the folder unless it is this user's and no one else can write it; -> the path."""
    path = os.fspath(path)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:          # a file (or a dangling link) in the folder's place
        raise UnsafeFolder(f"{what} {path} is a file, not a folder") from None
    except OSError as error:
        raise UnsafeFolder(f"{what} {path} cannot be made ({error.strerror})") from None
    problem = folder_problem(path)
    if problem is not None:
        raise UnsafeFolder(f"{what} {path} {problem}")
    return path


def write_private(path, data: bytes) -> None:
    """Write `data` to `path` (mode 0600) atomically (replace_atomically)."""
    replace_atomically(path, data)


def replace_atomically(path, data: bytes, mode: int | None = 0o600,
                       durable: bool = False) -> None:
    """Replace `path` with `data` at once: a reader sees the old file or the whole new
    one, and nothing already at a temporary name is followed or reused. `mode`: the new
    file's permissions (None: what a new file gets under the umask); `durable`: the data
    and the rename reach the disk before this returns (fsync of the file and its folder),
    as checkpoints and saved models need."""
    path = os.fspath(path)
    folder, name = os.path.split(path)
    descriptor, temporary = tempfile.mkstemp(dir=folder or ".", prefix=f".{name}.",
                                             suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            out.flush()
            if mode is None or mode != 0o600:   # mkstemp made it 0600
                os.fchmod(out.fileno(), 0o666 & ~current_umask() if mode is None else mode)
            if durable:
                os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    if durable:
        fsync_directory(folder or ".")


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_directory(directory) -> None:
    """Make a rename durable (a no-op where directories cannot be opened, e.g. Windows)."""
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
