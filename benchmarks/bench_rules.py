"""Generated loops (cpu_rules*.py, from nntile_kernels/formulas/) against the hand-written
loops of git revisions, in one process: ns per element and whether the results are
bitwise equal.

Run: python benchmarks/bench_rules.py [--edge 512] [--repeat 200] [--only hypot maximum]
Each case names the revision whose module held its hand-written loop (ab8850b: add,
multiply, scale, sub, div, tanh, sigmoid and Adam; 9601058: hypot, maximum, minimum;
96442a2: SGD's numba loop in cpu_optim.py, and pow, pow_backward and add_scalar, the
NumPy functions of generic.py that the cpu table called, bound to NumPy here).
Those modules are read with `git show` and imported beside the current ones, so both
sides run the same numba and the same tiles; each timing is the best of `repeat` calls,
the old and the new kernel called in alternation, one thread.

BROADCAST_CASES (which --only names too) are the slice and fiber ops of
rules_broadcast.py against their hand-written loops of 96442a2 (scale_slice, NumPy's
expression of generic_rope.py, and sum_backward's loop: aff0d51; extremum_backward's
and norm_slice_backward's: 9676589; mse_backward's: 0cb1cb0), and REDUCE_CASES
the reductions of rules_reduce.py against their loops of aff0d51 (the norms' and
extremum_count's: 9676589; a whole tile's sum and mse: 0cb1cb0, and valid_count, the
NumPy expression of generic_loss.py the cpu table called), on GPT-2's tile shapes.
INDEXED_CASES are the masks and rope of rules_indexed.py against their loops of 0cb1cb0
(cpu_slice.py, cpu_rope.py) on attention's tiles; SOFTMAX_CASES the softmax family
of rules_softmax.py against the loops of 0cb1cb0's cpu_reduce.py (logsumexp_merge, an
elementwise rule now, is a case of CASES), and softmax_backward's two rules against its
NumPy expression of 0cb1cb0's generic.py; LOSS_CASES the losses' rules against their
loops of 0cb1cb0 (cpu_loss.py) on GPT-2's logits tiles. An old module imports the
cpu_common.py of its own revision.
"""

import argparse
import functools
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from nntile_kernels import cpu  # noqa: E402 - needs the path above
from nntile_kernels.formulas import BROADCAST, EXP_REDUCTIONS, REDUCTIONS  # noqa: E402

# kernel -> (revision, its module, arrays as letters of `tiles`, keyword parameters)
CASES = {
    "add": ("ab8850b", "cpu_elementwise", "xyz", {"alpha": 0.5, "beta": -2.0}),
    "add beta=0": ("ab8850b", "cpu_elementwise", "xyz", {"alpha": 0.5, "beta": 0.0}),
    "multiply": ("ab8850b", "cpu_elementwise", "xyz", {"alpha": -1.5}),
    "scale": ("ab8850b", "cpu_elementwise", "xz", {"alpha": 3.0}),
    "sub": ("ab8850b", "cpu_math", "xyz", {}),
    "div": ("ab8850b", "cpu_math", "xyz", {}),
    "tanh": ("ab8850b", "cpu_math", "xz", {}),
    "tanh_backward": ("ab8850b", "cpu_math", "xyz", {}),
    "sigmoid": ("ab8850b", "cpu_math", "xz", {}),
    "sigmoid_backward": ("ab8850b", "cpu_math", "xyz", {}),
    "adam_step": ("ab8850b", "cpu_optim", "sgpmv", {"lr": 0.01, "weight_decay": 0.1}),
    "adamw_step": ("ab8850b", "cpu_optim", "sgpmv", {"lr": 0.01, "weight_decay": 0.1}),
    "hypot": ("9601058", "cpu_math", "xyz", {"alpha": 0.5, "beta": -2.0}),
    "hypot beta=0": ("9601058", "cpu_math", "xyz", {"alpha": 0.5, "beta": 0.0}),
    "hypot_backward": ("9601058", "cpu_math", "xvgz", {"alpha": 0.5}),
    "hypot_scalar_inverse": ("9601058", "cpu_math", "xz", {"eps": 0.1, "alpha": 2.0}),
    "maximum": ("9601058", "cpu_math", "xyz", {"alpha": 1.0, "beta": 1.0}),
    "maximum beta=0": ("9601058", "cpu_math", "xyz", {"alpha": 1.0, "beta": 0.0}),
    "minimum": ("9601058", "cpu_math", "xyz", {"alpha": 1.0, "beta": 1.0}),
    "pow exp=2": ("96442a2", "generic", "xz", {"alpha": 0.5, "exp": 2.0}),
    "pow exp=3": ("96442a2", "generic", "xz", {"alpha": 0.5, "exp": 3.0}),
    "pow exp=-0.5": ("96442a2", "generic", "vz", {"alpha": 1.0, "exp": -0.5}),
    "pow_backward exp=2": ("96442a2", "generic", "xyz", {"alpha": 0.5, "exp": 2.0}),
    "pow_backward exp=3": ("96442a2", "generic", "xyz", {"alpha": 0.5, "exp": 3.0}),
    "pow_backward exp=-0.5": ("96442a2", "generic", "vyz", {"alpha": 1.0, "exp": -0.5}),
    "add_scalar": ("96442a2", "generic", "z", {"value": 0.25}),
    "sgd_step momentum=0": ("96442a2", "cpu_optim", "sgpm",
                            {"lr": 0.01, "weight_decay": 0.1}),
    "sgd_step momentum=0.9": ("96442a2", "cpu_optim", "sgpm",
                              {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1,
                               "dampening": 0.1}),
    "sgd_step momentum=0.9 nesterov": ("96442a2", "cpu_optim", "sgpm",
                                       {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1,
                                        "nesterov": True}),
    "logsumexp_merge": ("0cb1cb0", "cpu_reduce", "xyz", {"alpha": 1.0, "beta": 1.0}),
    "logsumexp_merge beta=0": ("0cb1cb0", "cpu_reduce", "xyz", {"alpha": 0.5, "beta": 0.0}),
}

# GPT-2's tiles: [C, T] activations (768 x 512; LayerNorm's slices along C, axis 0) and
# [keys, queries, heads, batch] attention scores (the softmax's slices along the keys)
LAYER = (768, 512)
SCORES = (64, 512, 12, 4)
_SLICE_SHAPES = ((LAYER, 0, 0), (LAYER, 1, 0), (SCORES, 0, 0), (SCORES, 1, 0))
_FIBER_SHAPES = ((LAYER, 0, 0), (LAYER, 1, 0), (SCORES, 2, 1))
# a whole tile (no axis): a layer's activations, and its MLP's [4C, T]
_WHOLE_SHAPES = ((LAYER, 0, 0), ((4 * LAYER[0], LAYER[1]), 0, 0))
# kernel -> (revision, its module, ((shape, axis, batch_ndim), ...), keyword parameters)
BROADCAST_CASES = {
    "add_slice": ("96442a2", "cpu_slice", _SLICE_SHAPES, {"alpha": -1.0, "beta": 1.0}),
    "add_slice beta=0": ("96442a2", "cpu_slice", _SLICE_SHAPES, {"alpha": 2.0, "beta": 0.0}),
    "multiply_slice": ("96442a2", "cpu_slice", _SLICE_SHAPES, {"alpha": 0.5}),
    "sumprod_slice_backward": ("96442a2", "cpu_slice", _SLICE_SHAPES, {"alpha": -1.0}),
    "logsumexp_backward": ("96442a2", "cpu_slice", _SLICE_SHAPES, {}),
    "softmax_from_logsumexp": ("96442a2", "cpu_slice", _SLICE_SHAPES, {}),
    "softmax_from_logsumexp_backward": ("96442a2", "cpu_slice", _SLICE_SHAPES, {}),
    # fibers along C (axis 0: LayerNorm's gamma and beta) or T (axis 1) of a [C, T] tile,
    # and along the heads of the scores with the batch dim kept
    "add_fiber": ("96442a2", "cpu_reduce", _FIBER_SHAPES, {"alpha": 1.0, "beta": 1.0}),
    "add_fiber beta=0": ("96442a2", "cpu_reduce", _FIBER_SHAPES, {"alpha": 1.0, "beta": 0.0}),
    "multiply_fiber": ("96442a2", "cpu_norm", _FIBER_SHAPES, {"alpha": 1.0}),
    "sumprod_fiber_backward": ("96442a2", "cpu_norm", _FIBER_SHAPES, {"alpha": 1.0}),
    "scale_fiber": ("96442a2", "cpu_math_fiber", _FIBER_SHAPES, {"alpha": 1.0}),
    "norm_fiber_backward": ("96442a2", "cpu_math_fiber", _FIBER_SHAPES, {"alpha": 1.0}),
    "scale_slice": ("aff0d51", "generic_rope", _SLICE_SHAPES, {"alpha": 0.5}),
    "sum_backward": ("aff0d51", "cpu_math_fiber", ((LAYER, 0, 0), (SCORES, 0, 0)),
                     {"alpha": 0.5}),
    "norm_slice_backward": ("9676589", "cpu_math", _SLICE_SHAPES, {"alpha": 1.0}),
    # max pooling's backward (x in whole numbers, y its maximum: ties share dy)
    "extremum_backward": ("9676589", "cpu_math", _SLICE_SHAPES, {}),
    # the backward of mse, its dloss 0-d
    "mse_backward": ("0cb1cb0", "cpu_loss", _WHOLE_SHAPES, {"alpha": 0.5}),
}
# the reductions: kernel -> (revision, its module, shapes, keyword parameters)
REDUCE_CASES = {
    "sum_slice": ("aff0d51", "cpu_slice", _SLICE_SHAPES, {"alpha": 1.0, "beta": 0.0}),
    "sum_slice beta=1": ("aff0d51", "cpu_slice", _SLICE_SHAPES, {"alpha": 0.5, "beta": 1.0}),
    "sumprod_slice": ("aff0d51", "cpu_slice", _SLICE_SHAPES, {"alpha": 1.0, "beta": 0.0}),
    "sum_fiber": ("aff0d51", "cpu_reduce", _FIBER_SHAPES, {"alpha": 1.0, "beta": 0.0}),
    "sumprod_fiber": ("aff0d51", "cpu_norm", _FIBER_SHAPES, {"alpha": 1.0, "beta": 1.0}),
    "max_slice": ("aff0d51", "cpu_math", _SLICE_SHAPES, {"beta": 0.0}),
    "max_slice beta=1": ("aff0d51", "cpu_math", _SLICE_SHAPES, {"beta": 1.0}),
    "min_slice": ("aff0d51", "cpu_math", _SLICE_SHAPES, {"beta": 0.0}),
    # the 2-norms (gradient clipping, RMSNorm): one float64 chain per output before
    "norm_slice": ("9676589", "cpu_math", _SLICE_SHAPES, {"alpha": 1.0, "beta": 0.0}),
    "norm_slice beta=1": ("9676589", "cpu_math", _SLICE_SHAPES, {"alpha": 0.5, "beta": 1.0}),
    "norm_fiber": ("9676589", "cpu_math_fiber", _FIBER_SHAPES, {"alpha": 1.0, "beta": 1.0}),
    # max pooling's backward: how many entries share each slice's maximum
    "extremum_count": ("9676589", "cpu_math", _SLICE_SHAPES, {"beta": 0.0}),
    # a whole tile to a 0-d output: one float64 chain before (valid_count: NumPy's
    # count_nonzero of the comparison, int64 labels with a quarter ignored)
    "sum": ("0cb1cb0", "cpu_reduce", _WHOLE_SHAPES, {"alpha": 1.0, "beta": 0.0}),
    "mse": ("0cb1cb0", "cpu_loss", _WHOLE_SHAPES, {"alpha": 0.5, "beta": 1.0}),
    "valid_count": ("0cb1cb0", "generic_loss", _WHOLE_SHAPES, {"beta": 0.0}),
}
# the masks on GPT-2's scores [keys, queries, heads] (the graph masks in place; a tile
# off the diagonal has offsets) and rope on Llama's [head_dim, T, heads] with its
# [head_dim/2, T] tables: kernel -> (revision, module, tile shape, in place, parameters)
_SCORES = (512, 512, 12)
INDEXED_CASES = {
    "mask_causal": ("0cb1cb0", "cpu_slice", _SCORES, True, {"val": -np.inf}),
    "mask_causal offsets": ("0cb1cb0", "cpu_slice", _SCORES, True,
                            {"val": -np.inf, "key_offset": 256, "query_offset": 512}),
    "mask_causal out of place": ("0cb1cb0", "cpu_slice", _SCORES, False, {"val": -np.inf}),
    "mask_scalar": ("0cb1cb0", "cpu_slice", _SCORES, True, {"val": -np.inf, "batch_ndim": 1}),
    "mask_scalar causal": ("0cb1cb0", "cpu_slice", _SCORES, True,
                           {"val": -np.inf, "batch_ndim": 1}),
    "rope": ("0cb1cb0", "cpu_rope", (64, 512, 12), False, {}),
    "rope_backward": ("0cb1cb0", "cpu_rope", (64, 512, 12), False, {}),
}
# the softmax family of rules_softmax.py against the hand-written loops of 0cb1cb0, on
# the [C, T] tile and the scores along the keys (axis 0: attention's) and the queries
_SOFTMAX_SHAPES = ((LAYER, 0, 0), (LAYER, 1, 0), (SCORES, 0, 0), (SCORES, 1, 0))
SOFTMAX_CASES = {
    "softmax": ("0cb1cb0", "cpu_reduce", _SOFTMAX_SHAPES, {}),
    "logsumexp": ("0cb1cb0", "cpu_reduce", _SOFTMAX_SHAPES, {"beta": 0.0}),
    "logsumexp beta=1": ("0cb1cb0", "cpu_reduce", _SOFTMAX_SHAPES, {"beta": 1.0}),
    "maxsumexp": ("0cb1cb0", "cpu_reduce", _SOFTMAX_SHAPES, {}),
    # NumPy's expression before; now sumprod_slice's and softmax_from_logsumexp_backward's
    # loops
    "softmax_backward": ("0cb1cb0", "generic", _SOFTMAX_SHAPES, {}),
}

# GPT-2's logits [vocab, tokens]: the 50257 classes cut into class tiles of 4096 (or 768)
# by 512 tokens, class tile 0 (which checks the labels) or another; labels over the whole
# vocabulary, an eighth of them ignore_index
_VOCAB = {"num_classes": 50257, "ignore_index": -100}
LOSS_CASES = {
    "cross_entropy_lse_backward": ("0cb1cb0", "cpu_loss", (4096, 512), False, _VOCAB),
    "cross_entropy_lse_backward 768": ("0cb1cb0", "cpu_loss", (768, 512), False, _VOCAB),
    "cross_entropy_lse_backward class_offset": ("0cb1cb0", "cpu_loss", (4096, 512), False,
                                                dict(_VOCAB, class_offset=4096)),
    # the loss itself: one pick per token (class tile 0 also adds the lse and checks)
    "cross_entropy_lse": ("0cb1cb0", "cpu_loss", (4096, 512), False, _VOCAB),
    "cross_entropy_lse class_offset": ("0cb1cb0", "cpu_loss", (4096, 512), False,
                                       dict(_VOCAB, class_offset=4096)),
    # the whole class axis in one tile (a vocabulary of 4096, or 768, classes)
    "cross_entropy_backward": ("0cb1cb0", "cpu_loss", (4096, 512), False, {"alpha": 0.5}),
    "cross_entropy_backward 768": ("0cb1cb0", "cpu_loss", (768, 512), False, {"alpha": 0.5}),
    "cross_entropy": ("0cb1cb0", "cpu_loss", (4096, 512), False, {"alpha": 0.5, "beta": 1.0}),
    "cross_entropy 768": ("0cb1cb0", "cpu_loss", (768, 512), False, {"alpha": 0.5}),
}


def old_module(revision, name, folder):
    """nntile_kernels/<name>.py of `revision`, imported as a sibling of the current modules
    (with the revision's own cpu_common.py: helpers such as row_dot have gone since)."""
    source = subprocess.run(["git", "show", f"{revision}:nntile_kernels/{name}.py"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    if name != "cpu_common" and "from .cpu_common import" in source:
        common = old_module(revision, "cpu_common", folder)
        sys.modules[common.__name__] = common
        source = source.replace("from .cpu_common import",
                                f"from .before_{revision}_cpu_common import")
    path = Path(folder) / f"before_{revision}_{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"nntile_kernels.before_{revision}_{name}",
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def old_kernel(module, name):
    """The hand-written kernel; generic*.py's take the array module first."""
    kernel = getattr(module, name)
    generic = "_generic" in module.__name__   # generic.py, generic_rope.py, ...
    return functools.partial(kernel, np) if generic else kernel


def make_tiles(edge, dtype, seed=0):
    rng = np.random.default_rng(seed)
    tiles = {key: np.asfortranarray(rng.standard_normal((edge, edge)).astype(dtype))
             for key in "xyzgpm"}
    tiles["v"] = np.asfortranarray(rng.uniform(0.1, 1.0, (edge, edge)).astype(dtype))
    tiles["s"] = np.array(5)   # the Adam and SGD step counter
    return tiles


def best_ns(calls, repeat, elements):
    """Best-of-`repeat` ns per element of each call, the calls made in alternation."""
    best = [float("inf")] * len(calls)
    for _ in range(repeat):
        for index, call in enumerate(calls):
            start = time.perf_counter()
            call()
            best[index] = min(best[index], time.perf_counter() - start)
    return [seconds / elements * 1e9 for seconds in best]


def bitwise_equal(kernels, letters, params, dtype, edge):
    """Both kernels on copies of the same tiles (Adam at step 1 and step 5)."""
    results = []
    for kernel in kernels:
        outs = []
        for step in (1, 5):
            tiles = make_tiles(edge, dtype)
            tiles["s"] = np.array(step)
            arrays = [tiles[letter] for letter in letters]
            kernel(*arrays, **params)
            outs += [array.copy() for array in arrays]
        results.append(outs)
    return all(np.array_equal(a, b, equal_nan=True) for a, b in zip(*results))


def broadcast_arrays(name, shape, axis, batch_ndim, dtype, seed=0):
    """The arrays of a broadcast rule's kernel: full tiles of `shape`, its partners a
    slice (the shape without `axis`) or a fiber (`axis` and the batch dims); normal
    values, a norm's y in [0.1, 1) (never 0: both kernels skip y == 0 alike)."""
    broadcast, rng = BROADCAST[name], np.random.default_rng(seed)
    if broadcast.shape == "scalar":
        part = ()
    elif broadcast.shape == "slice":
        part = shape[:axis] + shape[axis + 1:]
    else:
        part = (shape[axis], *shape[len(shape) - batch_ndim:])
    arrays = []
    for array in (*broadcast.rule.inputs, broadcast.rule.output):
        size = part if array in broadcast.partners else shape
        values = (rng.uniform(0.1, 1.0, size)
                  if name.startswith("norm_") and array == "y"
                  else rng.standard_normal(size))
        arrays.append(np.array(values.astype(dtype), order="F"))   # a 0-d partner stays 0-d
    if name == "extremum_backward":   # x, y = its maximum, count = how many equal it
        x = np.round(arrays[0] * 2)
        y = x.max(axis=axis)
        count = (x == np.expand_dims(y, axis)).sum(axis=axis).astype(dtype)
        arrays[:3] = [np.asfortranarray(array) for array in (x, y, count)]
    return arrays


def reduce_arrays(name, shape, axis, batch_ndim, dtype, seed=0):
    """The arrays of a reduction: normal full tiles of `shape` and the output (a slice or
    a fiber), which beta == 1 reads; extremum_count's partner y is its tile's maximum
    along the axis, the tile in whole numbers (ties)."""
    reduction, rng = REDUCTIONS[name], np.random.default_rng(seed)
    if reduction.shape == "whole":
        part = ()
    elif reduction.shape == "slice":
        part = shape[:axis] + shape[axis + 1:]
    else:
        part = (shape[axis], *shape[len(shape) - batch_ndim:])
    # np.array keeps a 0-d output 0-d (np.asfortranarray would make it 1-d)
    arrays = [np.array(rng.standard_normal(size).astype(dtype), order="F")
              for size in (*(part if name in reduction.partners else shape
                             for name in reduction.inputs), part)]
    if reduction.partners:
        arrays[0] = np.asfortranarray(np.round(arrays[0] * 2))
        arrays[1] = np.asfortranarray(arrays[0].max(axis=axis))
    if name == "valid_count":
        arrays[0] = np.asfortranarray(np.where(rng.random(shape) < 0.25, -100,
                                               rng.integers(0, 50257, shape)))
    return arrays


def indexed_arrays(label, shape, in_place, dtype, seed=0):
    """The arrays of an indexed rule's kernel: normal tiles, a mask over the two leading
    dims (half kept at random, or the causal one: runs a branch predicts), rope's tables
    over the pairs and the second dim."""
    rng, name = np.random.default_rng(seed), label.split()[0]
    tiles = [np.asfortranarray(rng.standard_normal(shape).astype(dtype)) for _ in range(2)]
    if name == "mask_scalar":
        keys, queries = np.indices(shape[:2])
        mask = keys <= queries if "causal" in label else rng.random(shape[:2]) < 0.5
        tiles.insert(0, np.asfortranarray(mask))
    elif name.startswith("rope"):
        tables = (shape[0] // 2, shape[1])
        tiles[:0] = [np.asfortranarray(rng.standard_normal(tables).astype(dtype))
                     for _ in range(2)]
    if in_place:
        tiles[-1] = tiles[-2]
    return tiles


def loss_arrays(label, shape, in_place, dtype, seed=0):
    """A loss's arrays: normal logits, their lse per column (so probabilities below 1),
    labels over the whole vocabulary (an eighth ignored), count, dloss, dlogits (the loss,
    for cross_entropy_lse); or, for cross_entropy_backward (cross_entropy), logits, labels
    over the tile's classes, dloss, dlogits (the loss)."""
    rng = np.random.default_rng(seed)
    logits = np.asfortranarray(rng.standard_normal(shape).astype(dtype))
    dloss, dlogits = np.array(0.5, dtype), np.zeros(shape, dtype, order="F")
    if label.startswith("cross_entropy_backward"):
        return [logits, rng.integers(0, shape[0], shape[1]), dloss, dlogits]
    if label.split()[0] == "cross_entropy":   # its loss, which beta = 1 reads
        return [logits, rng.integers(0, shape[0], shape[1]), np.array(0.5, dtype)]
    lse = np.log(np.exp(logits).sum(axis=0) + 50000.0).astype(dtype)
    labels = np.where(rng.random(shape[1]) < 0.125, -100, rng.integers(0, 50257, shape[1]))
    count = np.array(np.count_nonzero(labels != -100), dtype)
    if label.startswith("cross_entropy_lse_backward"):
        return [logits, lse, labels, count, dloss, dlogits]
    return [logits, lse, labels, count, np.array(0.0, dtype)]   # the loss, its output


def run_indexed_cases(labels, cases, make_arrays, modules, repeat):
    """One row per case: the old loop and the generated one on the same tiles."""
    print(f"\nns per element, best of {repeat}; before = 0cb1cb0, after = this checkout")
    print("| kernel | tile | fp32 before / after ns | fp64 before / after ns "
          "| bitwise fp32 / fp64 |")
    print("|---|---|---|---|---|")
    for label in labels:
        revision, module, shape, in_place, params = cases[label]
        name = label.split()[0]
        kernels = (old_kernel(modules[revision, module], name), cpu.KERNELS[name])
        cells, same = [], []
        for dtype in (np.float32, np.float64):
            arrays = make_arrays(label, shape, in_place, dtype)
            for kernel in kernels:
                kernel(*arrays, **params)   # compile outside the timing
            calls = [lambda k=k, a=arrays, p=params: k(*a, **p) for k in kernels]
            before, after = best_ns(calls, repeat, np.prod(shape))
            cells.append(f"{before:.3f} / {after:.3f}")
            outs = []
            for kernel in kernels:
                fresh = make_arrays(label, shape, in_place, dtype)
                kernel(*fresh, **params)
                outs.append(fresh[-1])
            same.append(np.array_equal(*outs, equal_nan=True))
        equal = " / ".join("yes" if flag else "no" for flag in same)
        tile = " x ".join(map(str, shape)) + (", in place" if in_place else "")
        print(f"| {label} | {tile} | {cells[0]} | {cells[1]} | {equal} |")


def softmax_arrays(name, shape, axis, batch_ndim, dtype, seed=0):
    """x (normal, times 4: exp spans a wide range) and the output: the tile (softmax),
    the slice (logsumexp, which beta == 1 reads) or the (2, slice) pair (maxsumexp);
    softmax_backward's y, dy and dx, three tiles."""
    rng = np.random.default_rng(seed)
    part = shape[:axis] + shape[axis + 1:]
    out = {"softmax": shape, "maxsumexp": (2, *part)}.get(name, part)
    sizes = (shape,) * 3 if name == "softmax_backward" else (shape, out)
    return [np.asfortranarray((rng.standard_normal(size) * 4).astype(dtype)) for size in sizes]


def run_axis_cases(labels, cases, make_arrays, kinds, modules, repeat):
    """The broadcast or reduction cases: one row per tile shape and axis; `kinds` maps a
    kernel to its shape ("slice", "fiber", or "scalar" and "whole": no axis)."""
    print(f"\nns per element, best of {repeat}; before = the case's revision, after = this "
          "checkout")
    print("| kernel | tile, axis | fp32 before / after ns | fp64 before / after ns "
          "| bitwise fp32 / fp64 |")
    print("|---|---|---|---|---|")
    for label in labels:
        revision, module, shapes, params = cases[label]
        name = label.split()[0]
        kernels = (old_kernel(modules[revision, module], name), cpu.KERNELS[name])
        for shape, axis, batch_ndim in shapes:
            whole = kinds[name].shape in ("scalar", "whole")
            keywords = dict(params) if whole else dict(params, axis=axis)
            if kinds[name].shape == "fiber":
                keywords["batch_ndim"] = batch_ndim
            cells, same = [], []
            for dtype in (np.float32, np.float64):
                arrays = make_arrays(name, shape, axis, batch_ndim, dtype)
                for kernel in kernels:
                    kernel(*arrays, **keywords)   # compile outside the timing
                calls = [lambda k=k, a=arrays, p=keywords: k(*a, **p) for k in kernels]
                before, after = best_ns(calls, repeat, np.prod(shape))
                cells.append(f"{before:.3f} / {after:.3f}")
                outs = []
                for kernel in kernels:
                    fresh = make_arrays(name, shape, axis, batch_ndim, dtype)
                    kernel(*fresh, **keywords)
                    outs.append(fresh[-1])
                same.append(np.array_equal(*outs, equal_nan=True))
            equal = " / ".join("yes" if flag else "no" for flag in same)
            tile = " x ".join(map(str, shape))
            where = ("whole" if whole else f"axis {axis}"
                     + (f", batch_ndim {batch_ndim}" if batch_ndim else ""))
            print(f"| {label} | {tile}, {where} | {cells[0]} | {cells[1]} | {equal} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="kernel names (default: every case)")
    parser.add_argument("--edge", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        cases = {label: case for label, case in CASES.items()
                 if not args.only or label.split()[0] in args.only}
        broadcasts = [label for label in BROADCAST_CASES
                      if not args.only or label.split()[0] in args.only]
        reductions = [label for label in REDUCE_CASES
                      if not args.only or label.split()[0] in args.only]
        indexed = [label for label in INDEXED_CASES
                   if not args.only or label.split()[0] in args.only]
        losses = [label for label in LOSS_CASES if not args.only or label.split()[0] in args.only]
        softmaxes = [label for label in SOFTMAX_CASES
                     if not args.only or label.split()[0] in args.only]
        modules = {(revision, name): old_module(revision, name, folder)
                   for revision, name in {case[:2] for case in (
                       *cases.values(), *(BROADCAST_CASES[label] for label in broadcasts),
                       *(REDUCE_CASES[label] for label in reductions),
                       *(INDEXED_CASES[label] for label in indexed),
                       *(LOSS_CASES[label] for label in losses),
                       *(SOFTMAX_CASES[label] for label in softmaxes))}}
        if cases:
            print(f"ns per element, {args.edge} x {args.edge} tile, best of {args.repeat}; "
                  "before = the case's revision, after = this checkout")
            print("| kernel | fp32 before / after ns | fp64 before / after ns "
                  "| bitwise fp32 / fp64 |")
            print("|---|---|---|---|")
        for label, (revision, module, letters, params) in cases.items():
            name = label.split()[0]
            kernels = (old_kernel(modules[revision, module], name), cpu.KERNELS[name])
            cells, same = [], []
            for dtype in (np.float32, np.float64):
                tiles = make_tiles(args.edge, dtype)
                arrays = [tiles[letter] for letter in letters]
                for kernel in kernels:
                    kernel(*arrays, **params)   # compile outside the timing
                calls = [lambda k=k, a=arrays, p=params: k(*a, **p) for k in kernels]
                before, after = best_ns(calls, args.repeat, args.edge * args.edge)
                cells.append(f"{before:.3f} / {after:.3f}")
                same.append(bitwise_equal(kernels, letters, params, dtype, args.edge))
            equal = " / ".join("yes" if flag else "no" for flag in same)
            print(f"| {label} | {cells[0]} | {cells[1]} | {equal} |")
        if broadcasts:
            run_axis_cases(broadcasts, BROADCAST_CASES, broadcast_arrays, BROADCAST, modules,
                           args.repeat)
        if reductions:
            run_axis_cases(reductions, REDUCE_CASES, reduce_arrays, REDUCTIONS, modules,
                           args.repeat)
        if indexed:
            run_indexed_cases(indexed, INDEXED_CASES, indexed_arrays, modules, args.repeat)
        if softmaxes:   # each reduces a slice
            slices = {name: argparse.Namespace(shape="slice")
                      for name in (*EXP_REDUCTIONS, "softmax_backward")}
            run_axis_cases(softmaxes, SOFTMAX_CASES, softmax_arrays, slices, modules,
                           args.repeat)
        if losses:
            run_indexed_cases(losses, LOSS_CASES, loss_arrays, modules, args.repeat)


if __name__ == "__main__":
    main()
