"""The test oracle shared by the plan and runtime suites (single-process and MPI).

`run_case` builds one small graph from a one-line case, runs it on a world (a
SimulatedWorld, or real MPI ranks), and lists every way the run disagrees with
NumPy or with the plan's own analysis. `collective_ok` turns one rank's verdict
into the verdict of all ranks, so a failing rank never leaves the others waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.special import erf

import nntile_spmd as nt
from nntile_kernels.formulas import BROADCAST, ELEMENTWISE, INDEXED
from nntile_kernels.rules import names_in
from nntile_spmd.runtime.executor import wait_with_deadline
from nntile_spmd.runtime.stats import mismatches
from nntile_spmd.runtime.timeouts import resolve_timeout

# -- the elementwise rules of nntile_kernels/formulas/ --------------------------------
# the params the rule tests call a rule with (add with beta == 0: y is not read)
RULE_PARAMS = {"add": {"alpha": 2.0, "beta": 0.0}, "multiply": {"alpha": -1.5},
               "scale": {"alpha": 3.0}, "hypot": {"alpha": -2.0, "beta": 0.0},
               "hypot_backward": {"alpha": 0.5}, "hypot_scalar_inverse": {"eps": 0.1, "alpha": 2.0},
               "maximum": {"alpha": 1.5, "beta": 0.0}, "minimum": {"alpha": -1.5, "beta": 0.0},
               "pow": {"alpha": 1.5, "exp": 3.0}, "pow_backward": {"alpha": 1.5, "exp": 3.0},
               "add_scalar": {"value": 0.25}, "logsumexp_merge": {"alpha": 2.0, "beta": 0.0}}
# params under which a rule with cases takes another branch than under RULE_PARAMS
OTHER_CASE_PARAMS = {"pow": {"alpha": 1.5, "exp": 2.0}, "pow_backward": {"alpha": 1.5, "exp": 2.0},
                     # log-space weights are not negative
                     "logsumexp_merge": {"alpha": 0.5, "beta": 3.0}}
BETA_CASE_PARAMS = {"alpha": 0.5, "beta": -2.0}     # add, hypot, maximum, minimum: y read
# the params each update is tested with: SGD with and without momentum and nesterov
_ADAM = {"lr": 0.01, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1}
_SGD = {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1, "dampening": 0.1}
UPDATE_PARAMS = {"adam_step": [_ADAM], "adamw_step": [_ADAM],
                 "sgd_step": [_SGD, {**_SGD, "nesterov": True}, {"lr": 0.01, "weight_decay": 0.1}]}
# the rules compiled into loops and kernels (clear and fill, reading no tile, are fills)
LOOPED_RULES = sorted(name for name, rule in ELEMENTWISE.items() if rule.reads_tiles())

# -- the broadcast rules of nntile_kernels/rules_broadcast.py --------------------------
# the params the broadcast rule tests call a rule with (the others take none)
BROADCAST_PARAMS = {
    "add_slice": {"alpha": -1.5, "beta": 0.5}, "multiply_slice": {"alpha": 0.5},
    "sumprod_slice_backward": {"alpha": 2.0}, "scale_fiber": {"alpha": -3.0},
    "norm_fiber_backward": {"alpha": 1.5}, "add_fiber": {"alpha": 0.5, "beta": -2.0},
    "multiply_fiber": {"alpha": -0.5}, "sumprod_fiber_backward": {"alpha": 3.0},
    "scale_slice": {"alpha": -2.0}, "sum_backward": {"alpha": 0.5},
    "norm_slice_backward": {"alpha": -0.5}, "mse_backward": {"alpha": 1.5}}


def partner_of(name, shape, axis, batch_ndim):
    """The shape of a partner of broadcast rule `name` on full tiles of `shape`."""
    kind = BROADCAST[name].shape
    if kind == "scalar":
        return ()
    if kind == "slice":
        return shape[:axis] + shape[axis + 1:]
    return (shape[axis], *shape[len(shape) - batch_ndim:])


def broadcast_arrays(name, shape, axis, batch_ndim, dtype, rng):
    """Full tiles of `shape` and the partners (a slice or a fiber), F-ordered, in the
    kernel's order; a norm's y has zeros (a fiber of x all 0), the output NaN where the
    rule does not read it."""
    broadcast = BROADCAST[name]
    part = partner_of(name, shape, axis, batch_ndim)
    arrays = {}
    for array in (*broadcast.rule.inputs, broadcast.rule.output):
        size = part if array in broadcast.partners else shape
        arrays[array] = np.array(rng.standard_normal(size), dtype, order="F")
    if name.startswith("norm_"):   # a norm is >= 0, and 0 where x is
        arrays["y"] = np.array(np.abs(arrays["y"]), order="F")
        arrays["y"].flat[::3] = 0.0
    if not broadcast.rule.accumulate:
        arrays[broadcast.rule.output][...] = np.nan
    return list(arrays.values())


def broadcast_cases(shape):
    """(name, axis, batch_ndim) of every broadcast rule on tiles of `shape`: every axis,
    a fiber with and without one batch dim (a 0-d partner's axis unused: 0)."""
    return [(name, axis, batch_ndim) for name, broadcast in sorted(BROADCAST.items())
            for batch_ndim in ((0, 1) if broadcast.shape == "fiber" else (0,))
            for axis in (range(len(shape) - batch_ndim) if broadcast.shape != "scalar"
                         else (0,))]


def broadcast_param_cases(name, arrays):
    """(params, copies of `arrays`) to call broadcast rule `name` with: BROADCAST_PARAMS,
    then each case's params (beta == 0) with the inputs that case leaves unread NaN."""
    rule, params = BROADCAST[name].rule, BROADCAST_PARAMS.get(name, {})
    cases = [(params, set())] + [(dict(params, beta=0.0), set(rule.inputs) - names_in(value))
                                 for _, value in rule.cases]
    for case_params, unread in cases:
        tiles = [array.copy(order="F") for array in arrays]
        for position, input_name in enumerate(rule.inputs):
            if input_name in unread:
                tiles[position][...] = np.nan
        yield case_params, tiles


# -- the indexed rules of nntile_kernels/rules_indexed.py (INDEXED) -------------------
# (name, tile shape, a partner's or mask's leading dims, keywords) of the dispatch tests
INDEXED_CASES = [
    ("mask_causal", (6, 4, 3, 2), 0, {"val": -np.inf, "key_offset": 3, "query_offset": 5}),
    ("mask_causal", (5, 7), 0, {"val": -2.5, "query_offset": -2}),
    ("mask_scalar", (6, 4, 3, 2), 2, {"val": -np.inf, "batch_ndim": 2}),
    ("mask_scalar", (5, 7, 3), 1, {"val": 7.0, "batch_ndim": 2}),
    ("mask_scalar", (5, 7, 3), 3, {"val": -1.0}),
    ("rope", (6, 4, 3, 2), 2, {}), ("rope", (8, 5), 1, {}),
    ("rope_backward", (6, 4, 3, 2), 2, {}), ("rope_backward", (8, 5), 1, {}),
]


def indexed_arrays(name, shape, lead, dtype, rng):
    """A call's arrays, F-ordered: a bool mask of the tile's `lead` leading dims, rope's
    sin and cos of its pairs' (head_dim/2, then the next lead - 1 dims); an output the
    rule does not read NaN."""
    def tile(dims):
        return np.asfortranarray(rng.standard_normal(dims).astype(dtype))
    out = tile(shape)
    if not INDEXED[name].accumulate:
        out[...] = np.nan
    if name == "mask_scalar":
        return [np.asfortranarray(rng.random(shape[:lead]) < 0.5), tile(shape), out]
    if name == "mask_causal":
        return [tile(shape), out]
    table = (shape[0] // 2, *shape[1:lead])
    return [tile(table), tile(table), tile(shape), out]


# (name, logits tile shape, keywords) of the losses' class-tile kernels (LOSSES; FROM_LSE's
# step, which takes num_classes from its kernel): uneven shapes, positions of one to three
# dims, class tiles at an offset (their labels mostly outside: the softmax part only)
LOSS_CASES = [
    ("cross_entropy_lse_backward", (5, 7), {"num_classes": 5}),
    ("cross_entropy_lse_backward", (4, 3, 5), {"num_classes": 11, "class_offset": 4}),
    ("cross_entropy_lse_backward", (3, 2, 3, 2), {"num_classes": 9, "class_offset": 6,
                                                   "ignore_index": -1}),
    ("cross_entropy_lse_backward", (6,), {"num_classes": 6}),
    ("cross_entropy_backward", (5, 7), {"alpha": 0.5, "num_classes": 5}),
    ("cross_entropy_backward", (4, 3, 2), {"alpha": -2.0, "num_classes": 4}),
]


def loss_arrays(name, shape, keywords, dtype, rng):
    """The arrays of a loss rule's call, F-ordered: logits, the lse of their row (of the
    whole class axis: past this tile's when it is one of several), labels (a third
    ignored where the rule has an ignore_index), then the 0-d count and dloss, and the
    dlogits accumulated into."""
    def tile(dims):
        return np.asfortranarray(rng.standard_normal(dims).astype(dtype))
    logits, positions = tile(shape), shape[1:]
    whole = shape[0] == keywords["num_classes"]
    lse = np.log(np.exp(logits.astype(np.float64)).sum(axis=0)) + (0.0 if whole else 1.0)
    # np.array, not np.asfortranarray (which makes a 0-d array 1-d): a 1-d tile's columns
    labels = np.array(rng.integers(0, keywords["num_classes"], positions), order="F")
    if name != "cross_entropy_backward":
        ignored = rng.random(positions) < 1 / 3
        labels = np.array(np.where(ignored, keywords.get("ignore_index", -100), labels), order="F")
        logits[...] = np.where(ignored, np.inf, logits)   # an ignored token adds 0, whatever
        scalars = [np.array(np.count_nonzero(~ignored), dtype), np.array(1.5, dtype)]
    else:
        scalars = [np.array(1.5, dtype)]
    return [logits, np.array(lse, dtype, order="F"), labels, *scalars, tile(shape)]


# -- NumPy references of the kernels (float64) ---------------------------------------


def kernel_keywords(shape, axis, batch_ndim, params):
    """The keywords a kernel of `shape` takes: a slice's or fiber's axis, a fiber's
    batch_ndim (none for a whole tile or a 0-d partner), then `params`."""
    keywords = dict(params) if shape in ("whole", "scalar") else dict(params, axis=axis)
    if shape == "fiber":
        keywords["batch_ndim"] = batch_ndim
    return keywords


def call_on_copies(kernel, shape, arrays, axis, batch_ndim, params):
    """`kernel` on F-ordered copies of `arrays` with the keywords its `shape` takes
    (kernel_keywords); the output copy."""
    out = [array.copy(order="F") for array in arrays]
    kernel(*out, **kernel_keywords(shape, axis, batch_ndim, params))
    return out[-1]


def assert_within_ulps(got, want, ulps=4, scale=None):
    """got equals want to `ulps` units in the last place of `scale` (by default the larger
    of the two magnitudes): how numba's loops are compared with NumPy, whose SIMD exp and
    power differ from libm in the last bit on some CPUs (AVX-512 among them). Bitwise
    checks are for what the project computes on both sides. NaNs and infinities must
    sit in the same places."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), "NaNs in other places")
    finite = np.isfinite(got) & np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(got)],
                                  want[~finite & ~np.isnan(want)], "infinities differ")
    if scale is None:
        scale = np.maximum(np.abs(got), np.abs(want))
    allowed = ulps * np.spacing(np.broadcast_to(np.abs(scale), got.shape).astype(got.dtype))
    excess = np.abs(got - want)[finite] - allowed[finite]
    assert (excess <= 0).all(), (
        f"{int((excess > 0).sum())} of {excess.size} values differ by more than {ulps} ulps")


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0.0)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def logsumexp(x, axis):
    top = x.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.exp(x - top).sum(axis=axis))


def layer_norm(x, gamma, beta, axis, eps=1e-5):
    """torch.nn.LayerNorm along `axis`: biased variance, eps inside the square root."""
    shape = [1] * x.ndim
    shape[axis] = -1
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)


def layer_norm_grads(x, gamma, dy, axis, eps=1e-5):
    """(dx, dgamma, dbeta) of layer_norm for output gradient dy, by the textbook formula."""
    shape = [1] * x.ndim
    shape[axis] = -1
    others = tuple(i for i in range(x.ndim) if i != axis)
    mean = x.mean(axis=axis, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=axis, keepdims=True) + eps)
    normalized = (x - mean) * rstd
    dnormalized = dy * gamma.reshape(shape)
    dx = rstd * (dnormalized - dnormalized.mean(axis=axis, keepdims=True)
                 - normalized * (dnormalized * normalized).mean(axis=axis, keepdims=True))
    return dx, (dy * normalized).sum(axis=others), dy.sum(axis=others)


# -- one-line op cases ---------------------------------------------------------------


@dataclass(frozen=True)
class OpCase:
    """inputs: "a:mk* b:kn" -- a name per tensor, one letter per dim (a drawn size);
    '*' marks a parameter (persistent, requires_grad) instead of an input, '?' a bool
    input (a random mask, about 70% True); an upper-case letter is an axis that must
    stay in one tile (softmax's axis).
    build(*tensors) adds the ops and returns the output tensor(s); reference(*arrays)
    returns the expected array(s) in the same order."""

    name: str
    inputs: str
    build: Callable
    reference: Callable

    def specs(self):
        """[(tensor name, dim letters, is parameter)] in input order."""
        result = []
        for item in self.inputs.split():
            name, dims = item.split(":")
            result.append((name, dims.rstrip("*?"), dims.endswith("*")))
        return result

    def bool_inputs(self) -> set:
        return {item.split(":")[0] for item in self.inputs.split() if item.endswith("?")}

    def letters(self) -> str:
        """Distinct dim letters, lower case, in first-use order."""
        return "".join(dict.fromkeys(c.lower() for _, dims, _ in self.specs() for c in dims))

    def whole_letters(self) -> set:
        return {c.lower() for _, dims, _ in self.specs() for c in dims if c.isupper()}

    def __str__(self) -> str:
        return self.name


def case_graph(case, sizes, dtype="fp64"):
    """(graph, [output tensors]) of `case` with dim letter -> size `sizes`."""
    graph = nt.LogicalGraph(case.name)
    masks = case.bool_inputs()
    tensors = [graph.tensor([sizes[c.lower()] for c in dims], name,
                            dtype="bool" if name in masks else dtype,
                            requires_grad=param, persistent=param, external=not param)
               for name, dims, param in case.specs()]
    outputs = case.build(*tensors)
    outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    for tensor in outputs:
        tensor.mark_output()
    return graph, outputs


def case_tiling(case, sizes, tiles=None, target_bytes=None):
    """Manual tiling from letter -> tile size (whole axes kept whole), else auto."""
    if tiles is None:
        return nt.TilingStrategy.auto(target_tile_bytes=target_bytes or 1 << 20)
    whole = case.whole_letters()
    shapes = {}
    for name, dims, _ in case.specs():
        shapes[name] = [sizes[c.lower()] if c.lower() in whole else tiles[c.lower()]
                        for c in dims]
    return nt.TilingStrategy.manual(shapes)


def case_arrays(case, sizes, seed):
    rng = np.random.default_rng(seed)
    masks = case.bool_inputs()
    # np.array, not np.asfortranarray: the latter turns a 0-d value into shape (1,)
    return [np.array(rng.random(shape) < 0.7 if name in masks else rng.standard_normal(shape),
                     order="F")
            for name, shape in ((name, [sizes[c.lower()] for c in dims])
                                for name, dims, _ in case.specs())]


def run_case(case, sizes, comm, distribution="single", tiles=None, target_bytes=None,
             seed=0, rtol=1e-9, **compile_options):
    """Run `case` on `comm`; return the list of problems (empty when all is well)."""
    graph, outputs = case_graph(case, sizes)
    cg = nt.compile(graph, comm=comm, tiling=case_tiling(case, sizes, tiles, target_bytes),
                    distribution=distribution, **compile_options)
    arrays = case_arrays(case, sizes, seed)
    for (name, _, _), array in zip(case.specs(), arrays):
        cg.bind_data(name, array)
    expected = case.reference(*[array.copy() for array in arrays])
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    cg.execute()
    cg.wait()
    problems = []
    for tensor, want in zip(outputs, expected):
        got = cg.get_output(tensor.name)
        if got.shape != np.shape(want) or not np.allclose(got, want, rtol=rtol, atol=rtol):
            error = np.max(np.abs(got - want)) if got.shape == np.shape(want) else "shape"
            problems.append(f"{tensor.name}: differs from NumPy (max error {error})")
    return problems + stat_problems(cg)


def stat_problems(cg, phases=None):
    """Measured bytes sent and received, FLOPs and peak bytes of this process's ranks
    vs the plan's for the phases the last execute ran."""
    problems = []
    ranks = list(cg.world.local_ranks())
    for rank in ranks:
        problems += mismatches(cg.stats_vs_plan(rank), rank)
    if len(ranks) == cg.world.size:   # a simulated world: the total must agree as well
        total = sum(cg.get_stats(rank).bytes_transferred for rank in ranks)
        if total != cg.estimate_communication(None, phases):
            problems.append(f"all ranks sent {total} bytes, the plan says "
                            f"{cg.estimate_communication(None, phases)}")
    return problems


def arrive_asleep(comm):
    """Return once every rank of `comm` is here, waiting as the runtime waits for a tile
    (a short spin, then asleep; RecvTimeout past $NNTILE_SPMD_RECV_TIMEOUT): MPICH's
    blocking collectives spin on a core, which a rank still at work needs where ranks
    outnumber cores (the 3- and 4-rank tiers on 2 cores)."""
    wait_with_deadline(comm.Ibarrier().Test, resolve_timeout(),
                       lambda: f"rank {comm.rank}: the other ranks at a test's verdict")


def worlds_and_presets(worlds, presets=("single", "ddp", "fsdp", "tp")) -> list:
    """(world size, preset) pairs: every preset on each world but one rank, where every
    preset plans the program `single` plans (tests/models/test_one_rank_presets.py
    checks it for the graphs that use this), so a one-rank world runs `single` alone."""
    return [(nranks, preset) for nranks in worlds for preset in presets
            if nranks > 1 or preset == "single"]


def collective_ok(comm, ok) -> bool:
    """True on every rank iff `ok` is true on every rank of `comm` (MPI.MIN)."""
    from mpi4py import MPI
    arrive_asleep(comm)
    return comm.allreduce(int(bool(ok)), op=MPI.MIN) == 1


def guarded(run, *args, **kwargs):
    """run(...) -> problems; an exception becomes this rank's problem, not a hang."""
    try:
        return run(*args, **kwargs)
    except Exception as error:   # noqa: BLE001 - reported through the verdict
        return [f"{type(error).__name__}: {error}"]


def on_rank_zero(comm, compute):
    """compute() on rank 0 only, its result sent to every rank of `comm`.

    For a one-process reference such as transformers in fp64: the other ranks neither
    import torch nor repeat the reference, and they wait asleep (`arrive_asleep`). A
    skip or failure on rank 0 skips or fails every rank alike, so none waits for a
    result that never comes."""
    outcome = None
    if comm.rank == 0:
        try:
            outcome = ("value", compute())
        except pytest.skip.Exception as error:
            outcome = ("skip", str(error))
        except BaseException as error:   # noqa: BLE001 - re-raised on every rank below
            outcome = ("fail", f"on rank 0: {type(error).__name__}: {error}")
    arrive_asleep(comm)
    kind, payload = comm.bcast(outcome, root=0)
    if kind == "skip":   # rank 0 computes the reference: its reason holds for every rank
        pytest.skip(f"the reference on rank 0 skipped: {payload}")
    if kind == "fail":
        pytest.fail(payload)
    return payload


def assert_no_rank_has_problems(comm, problems):
    """The collective verdict: every rank gets every rank's problems and fails alike."""
    arrive_asleep(comm)
    failures = [f"rank {rank}: {p}" for rank, ps in enumerate(comm.allgather(problems))
                for p in ps]
    assert not failures, "; ".join(failures[:10])


def adamw_gpt2_steps(distribution, comm=None, steps=2, **compile_options):
    """Two AdamW steps of a tiny fp64 GPT-2 (uneven batch tiles); (compiled graph,
    {parameter or "loss": value}) on this rank."""
    from nntile_spmd.models import gpt2
    from nntile_spmd.train import add_optimizer

    cfg = gpt2.GPT2Config(vocab_size=32, n_positions=12, n_embd=16, n_layer=2, n_head=2)
    model = gpt2.build_gpt2(cfg, batch=3, seq=12, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-3, weight_decay=0.01)
    cg = nt.compile(model.graph, comm=comm, distribution=distribution,
                    tiling=nt.TilingStrategy.manual({"input_ids": [5, 2]}), **compile_options)
    rng = np.random.default_rng(1)
    for name, value in model.init_params(rng).items():
        cg.bind_data(name, value)
    ids = np.asfortranarray(rng.integers(0, 32, (12, 3)))
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", ids)
    for _ in range(steps):
        cg.execute()
    return cg, {name: cg.get_output(name) for name in model.param_names + ["loss"]}
