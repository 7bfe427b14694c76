"""Plan layer: one verified plan cache file (plan/cache.py keeps the directory).

A file is a header line and a pickled plan. The header holds the format version, the
cache key it was written under (the graph's and the arguments' hash), the library's
fingerprint (version and a hash of its source) and the SHA-256 and length of the
pickle, so a flipped bit, a truncated write, a file renamed to another key or one left
by another build of the library is refused before anything is unpickled: an unpickled
damaged plan failed with messages that never named the cache (a missing module
'nntile_spmd.plaf', KeyError, "simulated deadlock", MemoryError) or, once, ran and
gave a wrong result.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import threading

from ..version import __version__
from .plan import gc_paused

MAGIC = b"nntile_spmd plan cache\n"
FORMAT_VERSION = 2     # 1: the bare pickle of the first cache
MAX_HEADER_BYTES = 4096


class BadCacheFile(Exception):
    """The file is not a plan this library wrote under this key; the text says why."""


@functools.cache
def library_fingerprint() -> str:
    """The version and a hash of the library's Python source: an edited plan class or
    planning rule (an editable install keeps its version) makes old plans stale."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as source:
                    digest.update(source.read())
    return f"{__version__}+{digest.hexdigest()[:16]}"


def write(path: str, key: str, plan) -> None:
    """Write `plan` under `key` to `path` atomically (a reader sees the old file or the
    whole new one)."""
    payload = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
    header = {"format": FORMAT_VERSION, "key": key, "library": library_fingerprint(),
              "sha256": hashlib.sha256(payload).hexdigest(), "bytes": len(payload)}
    temporary = f"{path}.tmp{os.getpid()}.{threading.get_ident()}"
    with open(temporary, "wb") as out:
        out.write(MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n")
        out.write(payload)
    os.replace(temporary, path)


def read(path: str, key: str):
    """The plan in `path`; raises BadCacheFile naming the first check that failed."""
    with open(path, "rb") as source:
        data = source.read()
    header, start = verified_header(data, key)
    payload = data[start:]
    if len(payload) != header["bytes"]:
        raise BadCacheFile(f"truncated or padded ({len(payload)} bytes of plan, the header "
                           f"says {header['bytes']})")
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise BadCacheFile("damaged (the plan's SHA-256 differs from the one written)")
    try:
        # a plan is ~10^5 small tuples: the cyclic collector's passes over them
        # would dominate the load time
        with gc_paused():
            return pickle.loads(payload)
    except Exception as error:   # the checksum matched: a plan class changed shape
        raise BadCacheFile(f"unreadable ({type(error).__name__}: {error})") from None


def verified_header(data: bytes, key: str) -> tuple:
    """Check the magic line and the header against `key` and this library; -> (header,
    the offset where the pickle starts)."""
    if not data.startswith(MAGIC):
        raise BadCacheFile("not a plan cache file of this format (no header)")
    end = data.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER_BYTES)
    try:
        header = json.loads(data[len(MAGIC):end]) if end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or not HEADER_FIELDS <= set(header):
        raise BadCacheFile("damaged (its header cannot be read)")
    for field, expected, meaning in (
            ("format", FORMAT_VERSION, "written in another cache format"),
            ("key", key, "written for another graph or other arguments"),
            ("library", library_fingerprint(), "written by another build of nntile_spmd")):
        if header[field] != expected:
            raise BadCacheFile(f"{meaning} ({field} {header[field]!r}, expected {expected!r})")
    return header, end + 1


HEADER_FIELDS = {"format", "key", "library", "sha256", "bytes"}
