"""Plan layer: a cache of plans, in memory and on disk, so a second compile of the
same graph (or a restarted job) skips planning.

The key is a hash of everything a plan is a pure function of: the graph (its JSON
export), every field of its PlanRequest (plan/plan_options.py: the world size, the
tiling strategy, the distribution, the window, the deterministic flag, the rank whose
program alone is derived (None: every rank's), the fusion flag, the offloading policy)
and the library version. Arguments without a stable description (an owner *function*
for a custom distribution, an attribute JSON cannot hold) make a plan uncacheable:
it is planned as usual and counted as such, never looked up under a wrong key.
The disk files (plan/cache_file.py) carry a header with the key, the library's
fingerprint and an HMAC-SHA256 signature under this user's secret
(plan/cache_secret.py), verified before the pickle is loaded: a damaged, stale or
forged file is refused with a warning and the plan is made again and rewritten. The
folder must be this user's and writable by no one else (nntile_spmd/private_files.py);
a folder that is not, a file in its place, or a key that cannot be made turns the
disk cache off with one warning saying why: the run plans as without a cache, it is
never stopped by the cache folder.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import threading
import time
import types
import warnings
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..private_files import UnsafeFolder, private_folder
from ..version import __version__
from . import cache_file
from .cache_secret import user_secret

ENV_DIRECTORY = "NNTILE_SPMD_PLAN_CACHE"
CODE_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              functools.partial)


class Uncacheable(Exception):
    """An argument has no stable text, so no key can stand for it."""


def stable_text(value) -> str:
    """A text that two equal arguments share in any process (no addresses)."""
    if value is None or isinstance(value, (bool, int, float, str, np.integer, np.floating)):
        return repr(value)
    if isinstance(value, np.ndarray):
        return f"array{value.shape}{value.dtype}:{hashlib.sha256(value.tobytes()).hexdigest()}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{stable_text(k)}:{stable_text(v)}"
                              for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))) + "}"
    if isinstance(value, (list, tuple, frozenset, set)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return f"{type(value).__name__}(" + ",".join(stable_text(v) for v in items) + ")"
    if isinstance(value, CODE_TYPES) or isinstance(value, type):
        raise Uncacheable(f"{value!r} is code, not data")
    fields = getattr(value, "__dict__", None)
    if fields is None:
        raise Uncacheable(f"{type(value).__name__} has no stable description")
    return f"{type(value).__qualname__}{stable_text(fields)}"


def plan_key(graph, request) -> str:
    """The cache key of the plan of `graph` that a PlanRequest asks for (raises
    Uncacheable). The text hashed is the one of the earlier positional arguments, field
    by field, so a key names the same plan as before (files on disk are refused anyway
    when the library's source changed: cache_file.py)."""
    from ..graph.export import to_json
    try:
        graph_text = json.dumps(to_json(graph), sort_keys=True)
    except TypeError as error:
        raise Uncacheable(str(error)) from None
    distribution, options = request.distribution, request.options
    if isinstance(distribution, dict) and any(isinstance(v, int) for v in distribution.values()):
        distribution = ("mesh", tuple(distribution.items()))   # a mesh's axis order counts
    text = "\n".join([__version__, graph_text, stable_text(request.tiling),
                      stable_text(distribution), str(request.nranks), str(options.window),
                      str(bool(options.deterministic)), str(options.own_rank),
                      str(bool(options.fuse)), stable_text(options.policy)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class CacheStats:
    hits: int = 0            # served from memory
    disk_hits: int = 0       # read from the directory
    misses: int = 0          # planned, then stored
    uncacheable: int = 0     # planned, no key
    planning_s: float = 0.0  # time spent planning on misses
    loading_s: float = 0.0   # time spent reading disk hits


class PlanCache:
    """Plans by key: the last `max_plans` in memory, all of them in `directory`
    (default: $NNTILE_SPMD_PLAN_CACHE; None keeps the cache in memory only)."""

    def __init__(self, directory=None, max_plans: int = 8):
        named_by = "plan cache folder" if directory else f"plan cache folder (${ENV_DIRECTORY})"
        self.directory = directory or os.environ.get(ENV_DIRECTORY) or None
        self.max_plans = max_plans
        self.plans = OrderedDict()
        self.stats = CacheStats()
        self.lock = threading.Lock()     # compile_async plans in a worker thread
        self.secret = None
        if self.directory:
            self.directory, self.secret = private_cache(self.directory, named_by)

    def plan(self, graph, request, build):
        """The plan of `graph` that a PlanRequest asks for: from memory, from disk, or
        `build()` (which must return the plan with its programs derived)."""
        try:
            key = plan_key(graph, request)
        except Uncacheable:
            with self.lock:
                self.stats.uncacheable += 1
            return build()
        with self.lock:
            plan = self.plans.get(key)
            if plan is not None:
                self.plans.move_to_end(key)
                self.stats.hits += 1
                return plan
        plan = self.load(key, graph)
        if plan is None:
            start = time.perf_counter()
            plan = build()
            with self.lock:
                self.stats.misses += 1
                self.stats.planning_s += time.perf_counter() - start
            self.store(key, plan)
        with self.lock:
            self.plans[key] = plan
            while len(self.plans) > self.max_plans:
                self.plans.popitem(last=False)
        return plan

    def path(self, key) -> str:
        return os.path.join(self.directory, f"plan-{key}.pkl")

    def store(self, key, plan) -> None:
        """Write the plan without its graph (the caller has it), atomically; a file that
        cannot be written is reported, and the run goes on with the plan it has."""
        if not self.directory:
            return
        detached = copy.copy(plan)
        detached.graph = None
        path = self.path(key)
        try:
            cache_file.write(path, key, detached, self.secret)
        except OSError as error:
            warnings.warn(f"plan cache file {path} could not be written ({file_error(error)}"
                          "); the plan is used without being cached", RuntimeWarning,
                          stacklevel=2)

    def load(self, key, graph):
        """The plan on disk under `key`, or None (a refused file is reported and will
        be overwritten by the plan made instead)."""
        path = self.path(key) if self.directory else None
        if path is None or not os.path.lexists(path):
            return None
        start = time.perf_counter()
        try:
            plan = cache_file.read(path, key, self.secret)
        except OSError as error:
            warnings.warn(f"plan cache file {path} is refused: {file_error(error)}; "
                          "planning again", RuntimeWarning, stacklevel=2)
            return None
        except cache_file.BadCacheFile as error:
            warnings.warn(f"plan cache file {path} is refused: {error}; planning again and "
                          "replacing it", RuntimeWarning, stacklevel=2)
            return None
        plan.graph = graph
        with self.lock:
            self.stats.disk_hits += 1
            self.stats.loading_s += time.perf_counter() - start
        return plan


def private_cache(directory, named_by: str) -> tuple:
    """(directory, secret) of a usable disk cache, or (None, None) with a warning that
    says why the disk cache is off."""
    try:
        return private_folder(directory, named_by), user_secret()
    except UnsafeFolder as error:
        warnings.warn(f"{error}; planning without the disk cache", RuntimeWarning,
                      stacklevel=3)
        return None, None


def file_error(error: OSError) -> str:
    """An OSError of a cache file in words (a folder in a file's place, mostly)."""
    if isinstance(error, IsADirectoryError):
        return "a folder is in the file's place; remove it"
    return error.strerror or str(error)


_SHARED = {}


def shared_cache() -> PlanCache:
    """The process-wide cache that compile(..., cache=True) uses: in memory, and in
    $NNTILE_SPMD_PLAN_CACHE's directory when it names one."""
    directory = os.environ.get(ENV_DIRECTORY) or None
    if directory not in _SHARED:
        _SHARED[directory] = PlanCache(directory)
    return _SHARED[directory]
