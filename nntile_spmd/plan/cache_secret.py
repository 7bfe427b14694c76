"""Plan layer: the per-user secret that signs plan cache files (plan/cache_file.py).

The secret is 32 random bytes in $XDG_CONFIG_HOME/nntile_spmd/plan-cache.key (by
default ~/.config/nntile_spmd/), mode 0600 in a folder only this user can write. It is
made once, atomically: written under a random name, then hard-linked to its final name
(a link fails when another process made the file first; that file is then read, so
concurrent ranks of one host agree on one secret). A secret file that is a link,
owned by another user, readable by anyone else or of the wrong length is refused:
whoever can read it can forge plans.
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
from pathlib import Path

from ..private_files import UnsafeFolder, private_folder

FILE_NAME = "plan-cache.key"
SECRET_BYTES = 32


def config_folder() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"),
                                                             ".config")
    return Path(base) / "nntile_spmd"


def user_secret() -> bytes:
    """This user's secret, made on first use; raises UnsafeFolder saying why not."""
    folder = private_folder(config_folder(), "the plan cache's key folder")
    path = os.path.join(folder, FILE_NAME)
    if not os.path.lexists(path):
        try:
            make_secret(folder, path)
        except OSError as error:    # a read-only home, a file system without hard links
            raise UnsafeFolder(f"the plan cache's key {path} cannot be made "
                               f"({error.strerror or error})") from None
    return read_secret(path)


def make_secret(folder: str, path: str) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{FILE_NAME}.")
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(secrets.token_bytes(SECRET_BYTES))
        os.link(temporary, path)
    except FileExistsError:
        pass                         # another process of this user made it first
    finally:
        os.unlink(temporary)


def read_secret(path: str) -> bytes:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        raise UnsafeFolder(f"the plan cache's key {path} cannot be read ({error.strerror}; "
                           "a link is refused)") from None
    with os.fdopen(descriptor, "rb") as source:
        info = os.fstat(source.fileno())
        data = source.read(SECRET_BYTES + 1)
    mode = stat.S_IMODE(info.st_mode)
    for wrong, why in ((info.st_uid != os.geteuid(), f"is owned by uid {info.st_uid}"),
                       (mode & 0o077, f"can be read by others (mode {mode:o}, 600 expected)"),
                       (len(data) != SECRET_BYTES, f"holds {len(data)} bytes, not "
                                                   f"{SECRET_BYTES}")):
        if wrong:
            raise UnsafeFolder(f"the plan cache's key {path} {why}: refused (remove it, "
                               "a new one is made)")
    return data
