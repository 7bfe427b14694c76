"""Plan layer: one signed plan cache file (plan/cache.py keeps the directory).

A file is a header line and a pickled plan. The header holds the format version, the
cache key it was written under (the graph's and the arguments' hash), the library's
fingerprint (version and a hash of its source), the pickle's length and an
HMAC-SHA256 of all of these and the pickle under this user's secret
(plan/cache_secret.py). The signature is verified before anything is unpickled, so a
flipped bit, a truncated write, a file renamed to another key, one left by another
build of the library, and a file planted by anyone who does not hold the secret are
refused, and their pickle never runs.

Why a signed pickle and not a data format: a plan is an object graph (programs of
instruction objects, tile tables, offloading policies, cached per-rank indexes) whose
classes change with the planner; writing it as arrays and JSON would mean a second
description of every plan class to keep in step. Only a file this user's own process
wrote passes the check, and that process could run any code anyway.
An unpickled damaged plan (before the checksum) failed with messages that never named
the cache (a missing module 'nntile_spmd.plaf', KeyError, "simulated deadlock") or,
once, ran and gave a wrong result.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import pickle

from ..private_files import write_private
from ..version import __version__
from .plan import gc_paused

MAGIC = b"nntile_spmd plan cache\n"
FORMAT_VERSION = 3     # 1: the bare pickle of the first cache; 2: a SHA-256, no signature
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


def signature(secret: bytes, header: dict, payload: bytes) -> str:
    """HMAC-SHA256 under `secret` of the header's other fields and the pickle."""
    fields = {field: value for field, value in header.items() if field != "hmac"}
    signed = json.dumps(fields, sort_keys=True).encode() + b"\n" + payload
    return hmac.new(secret, signed, hashlib.sha256).hexdigest()


def write(path: str, key: str, plan, secret: bytes) -> None:
    """Write `plan` under `key` to `path` (mode 0600) atomically, signed with `secret`
    (a reader sees the old file or the whole new one)."""
    payload = pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
    header = {"format": FORMAT_VERSION, "key": key, "library": library_fingerprint(),
              "bytes": len(payload)}
    header["hmac"] = signature(secret, header, payload)
    write_private(path, MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload)


def read(path: str, key: str, secret: bytes):
    """The plan in `path`; raises BadCacheFile naming the first check that failed (the
    pickle is loaded only once the signature under `secret` matched)."""
    with open(path, "rb") as source:
        data = source.read()
    header, start = verified_header(data, key)
    payload = data[start:]
    if len(payload) != header["bytes"]:
        raise BadCacheFile(f"truncated or padded ({len(payload)} bytes of plan, the header "
                           f"says {header['bytes']})")
    if not hmac.compare_digest(str(header["hmac"]), signature(secret, header, payload)):
        raise BadCacheFile("damaged or forged (its HMAC-SHA256 signature does not match "
                           "this user's key: changed since written, or written by someone "
                           "else or on a host with another key)")
    try:
        # a plan is ~10^5 small tuples: the cyclic collector's passes over them
        # would dominate the load time
        with gc_paused():
            return pickle.loads(payload)
    except Exception as error:   # the signature matched: a plan class changed shape
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
    if not isinstance(header, dict):
        raise BadCacheFile("damaged (its header cannot be read)")
    if header.get("format") != FORMAT_VERSION:
        raise BadCacheFile(f"written in another cache format (format {header.get('format')!r}"
                           f", expected {FORMAT_VERSION})")
    if not HEADER_FIELDS <= set(header):
        raise BadCacheFile("damaged (its header cannot be read)")
    for field, expected, meaning in (
            ("key", key, "written for another graph or other arguments"),
            ("library", library_fingerprint(), "written by another build of nntile_spmd")):
        if header[field] != expected:
            raise BadCacheFile(f"{meaning} ({field} {header[field]!r}, expected {expected!r})")
    return header, end + 1


HEADER_FIELDS = {"format", "key", "library", "bytes", "hmac"}
