"""The cpu kernel table: numba loops (disk-cached with cache=True) and BLAS for gemm.

Arrays only: never imports nntile_spmd, mpi4py or cupy. Same keys, signatures and
semantics as nntile_kernels.reference.
"""

import functools

import numpy as np

from . import (cpu_blas, cpu_conv, cpu_data, cpu_embedding,  # noqa: I001
               cpu_reduce, cpu_rules, cpu_rules_broadcast, cpu_rules_broadcast_scalar,
               cpu_rules_indexed, cpu_rules_loss, cpu_rules_optim, cpu_rules_params,
               cpu_rules_picked, cpu_rules_reduce, cpu_rules_softmax, generic, reference)
from .formulas import (BROADCAST, EXP_REDUCTIONS, FROM_LSE, INDEXED, LOSSES, PICKED,
                       PICKED_FROM_LSE, REDUCTIONS)
from .rules_indexed import AfterLogsumexp
from .rules_picked import PICKED_KEYWORDS

KERNELS = {
    # randn and dropout are whole-array uint64 hashing that NumPy already vectorises
    # (generic_random.py)
    "randn": reference.randn,
    "dropout": reference.dropout,
    "gemm": cpu_blas.gemm,
    "transpose": cpu_reduce.transpose,
    # any permutation: NumPy's strided copy (the cyclic transpose above is the hot one)
    "permute": reference.permute,
    # NumPy's own fill/memcpy/cast loops are already what a numba loop would be (clear,
    # fill: the reference evaluates their rules, a fill).
    "fill": reference.fill,
    "clear": reference.clear,
    "copy": reference.copy,
    "cast": reference.cast,
    # box copies are NumPy slice assignments (memcpy runs)
    "add_box": reference.add_box,
    "reshape_box": cpu_data.reshape_box,
    # the activations, their backwards, add, multiply, scale, hypot, maximum, minimum,
    # pow, add_scalar, logsumexp_merge: loops generated from their formulas (formulas/), as are
    # the SGD, Adam and AdamW steps
    **cpu_rules.KERNELS,
    **cpu_rules_params.KERNELS,
    **cpu_rules_optim.KERNELS,
    "embedding": cpu_embedding.embedding,
    "embedding_backward": cpu_embedding.embedding_backward,
    "conv2d_inplace": cpu_conv.conv2d_inplace,
    "conv2d_bwd_input_inplace": cpu_conv.conv2d_bwd_input_inplace,
    "conv2d_bwd_weight_inplace": cpu_conv.conv2d_bwd_weight_inplace,
    "copy_intersection": reference.copy_intersection,
    # the slice and fiber ops with a broadcast operand (add_slice, multiply_slice, the
    # softmax from a logsumexp and its backward, add_fiber, multiply_fiber, scale_fiber,
    # scale_slice, sum_backward, mse_backward, ...): loops generated from
    # their formulas, formulas/'s BROADCAST (a 0-d partner's in cpu_rules_broadcast_scalar.py)
    **{name: getattr(cpu_rules_broadcast_scalar if broadcast.shape == "scalar"
                     else cpu_rules_broadcast, name) for name, broadcast in BROADCAST.items()},
    # the reductions along an axis (sum_slice, sumprod_slice, sum_fiber, sumprod_fiber,
    # max_slice, min_slice, norm_slice, norm_fiber, extremum_count) and of a whole tile
    # (sum, mse, valid_count): loops generated from formulas/'s REDUCTIONS
    **{name: getattr(cpu_rules_reduce, name) for name in REDUCTIONS},
    # the masks (mask_scalar, mask_causal) and rope, rope_backward: loops generated from
    # their formulas (formulas/attention.py, rope.py)
    **{name: getattr(cpu_rules_indexed, name) for name in INDEXED},
    # cross_entropy_lse_backward: a loop generated from formulas/losses.py's LOSSES, and
    # cross_entropy_lse one from its PICKED
    **{name: getattr(cpu_rules_loss, name) for name in LOSSES},
    **{name: getattr(cpu_rules_picked, name) for name in PICKED},
    # the softmax family (softmax, logsumexp, maxsumexp): loops generated from
    # formulas/reductions.py; logsumexp_merge is an elementwise rule (cpu_rules_params.py)
    **{name: getattr(cpu_rules_softmax, name) for name in EXP_REDUCTIONS},
}
# cross_entropy_backward and cross_entropy: this table's logsumexp, then a loop generated
# from FROM_LSE or PICKED_FROM_LSE (formulas/losses.py)
KERNELS.update({name: AfterLogsumexp(name, getattr(cpu_rules_loss, f"{name}_from_lse"),
                                     KERNELS, np.empty) for name in FROM_LSE})
KERNELS.update({name: AfterLogsumexp(name, getattr(cpu_rules_picked, f"{name}_from_lse"),
                                     KERNELS, np.empty, PICKED_KEYWORDS)
                for name in PICKED_FROM_LSE})
# kernels of this table on tiles the plan aliases as views (generic_data.reshaped_call)
KERNELS["reshaped_call"] = functools.partial(reference.KERNELS["reshaped_call"].func, KERNELS)
# sumprod_slice then softmax_from_logsumexp_backward, this table's loops (generic.py)
KERNELS["softmax_backward"] = functools.partial(generic.softmax_backward, np, KERNELS)

# The entries above written by hand beside the reference's expression of the same
# formula, and why no rule family writes them (tests/kernels/test_kernels_table.py keeps
# this exact: a new hand-written twin is a decision made here, not an accident).
HAND_WRITTEN = {
    "gemm": "BLAS; the reference is NumPy's matmul, no loop of ours",
    "conv2d_inplace": "patches gathered (im2col) into one BLAS gemm",
    "conv2d_bwd_input_inplace": "a BLAS gemm scattered back (col2im)",
    "conv2d_bwd_weight_inplace": "patches gathered (im2col) into one BLAS gemm",
    "transpose": "an index map, blocked for the cache",
    "reshape_box": "an index map between reshaped boxes",
    "embedding": "a gather of vectors by id along any axis",
    "embedding_backward": "a scatter-add of vectors by id, in the ids' order",
}
