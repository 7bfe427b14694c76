"""The cuda kernel table: the generic kernels (generic*.py) bound to CuPy, gemm through
cuBLAS on the tiles in place where it can (cuda_blas.py), one launch where array
expressions would make several (cuda_fused.py: the output store, SGD/Adam/AdamW, zeroing;
cuda_attention.py: the causal mask, the softmax from a logsumexp and its backward),
and the elementwise rules (formulas/: activations, add, sub, multiply, div, scale,
hypot, maximum, minimum, pow, add_scalar) compiled into CuPy ElementwiseKernels (compiled_rules.py:
fp32/fp64 kernels; bf16 and fp16 tiles through the fp32 one; those no GPU check has run
yet, compiled_rules.AWAITING_GPU_CHECK, take the array expressions meanwhile), and so
are the broadcast rules (formulas/: add_slice, softmax_from_logsumexp, ...;
compiled_broadcast.py), the indexed ones (formulas/: the masks, rope;
compiled_indexed.py) and the cross-entropy backward's class tiles (formulas/losses.py:
compiled_indexed.CompiledLoss; cross_entropy_backward's after the table's logsumexp),
all of which await a GPU check: their entries take the kernels above meanwhile.

Arrays only: imports CuPy (>= 12, for ufunc.at), never nntile_spmd or mpi4py. Nothing
here synchronizes the stream but the embedding id check (generic_embedding.py) and the
cross-entropy label checks (the rules' `Check`): scalars that live in tiles (step
counters, dloss) stay on the device and enter the expressions as 0-d arrays.
"""

import functools

try:
    import cupy as cp
    import cupyx.scipy.special
except ImportError as error:  # only this backend needs CuPy
    raise ImportError(
        "nntile_kernels.cuda needs CuPy with a working CUDA install "
        "(e.g. `pip install cupy-cuda12x`); "
        "use nntile_kernels.get_kernels('cpu') on machines without an NVIDIA GPU"
    ) from error

from . import cuda_attention, cuda_blas, cuda_fused, generic, generic_slice
from .generic_common import FUSED_STORES
from .compiled_broadcast import CompiledBroadcast
from .compiled_indexed import CompiledIndexed, CompiledLoss
from .compiled_rules import AWAITING_GPU_CHECK, CompiledRule
from .formulas import BROADCAST, ELEMENTWISE, FROM_LSE, INDEXED, LOSSES
from .rules_cuda import CUDA_PREAMBLE, cuda_source
from .rules_cuda_broadcast import cuda_broadcast_source
from .rules_cuda_indexed import cuda_indexed_source, cuda_loss_source
from .rules_indexed import AfterLogsumexp


def elementwise_compiler(name, source=cuda_source):
    """rule, dtype name -> a CuPy ElementwiseKernel running the rule in one pass over a
    tile (array expressions make one pass per operator); `source` writes its C++."""
    return lambda rule, dtype: cp.ElementwiseKernel(*source(rule, dtype),
                                                    name=f"nntile_{name}_{dtype}",
                                                    preamble=CUDA_PREAMBLE)


def gemm(a, b, c, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, ndim=1,
         batch_ndim=0, compute_type=None):
    """c = alpha*op(a)·op(b) + beta*c: one cuBLAS call on the tiles where it takes them."""
    if cuda_blas.takes_as_is(a, b, c, alpha, beta, compute_type):
        cuda_blas.gemm(a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b,
                       ndim=ndim, batch_ndim=batch_ndim)
    else:
        generic.gemm(cp, a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b,
                     ndim=ndim, batch_ndim=batch_ndim, compute_type=compute_type)


KERNELS = generic.table(cp, cupyx.scipy.special)
KERNELS.update(gemm=gemm, sgd_step=cuda_fused.sgd_step, adam_step=cuda_fused.adam_step,
               adamw_step=cuda_fused.adamw_step, clear=cuda_fused.clear)
KERNELS.update(cuda_attention.with_fallback(KERNELS))
# add_slice and add_fiber as the fused store's one launch: their compiled broadcast
# kernels' fallback (below)
KERNELS["add_slice"] = functools.partial(generic_slice.add_slice, cp)
KERNELS["add_fiber"] = functools.partial(generic.add_fiber, cp)
FUSED_STORES[cp.ndarray] = cuda_fused.store
# clear and fill (they read no tile) stay the memset above and the rule's fill; integer
# tiles (add_scalar's step counters) take the rule's array expressions
KERNELS.update({name: CompiledRule(name, rule, KERNELS[name], elementwise_compiler(name), cp,
                                   dispatch=name not in AWAITING_GPU_CHECK)
                for name, rule in ELEMENTWISE.items() if rule.reads_tiles()})
# the broadcast and indexed rules' compiled kernels, over the entries above (the fallback
# while a name awaits a GPU check, and for the tiles the kernel does not take)
for _entry, _rules, _source in ((CompiledBroadcast, BROADCAST, cuda_broadcast_source),
                                (CompiledIndexed, INDEXED, cuda_indexed_source)):
    KERNELS.update({name: _entry(name, rule, KERNELS[name], elementwise_compiler(name, _source),
                                 cp, dispatch=name not in AWAITING_GPU_CHECK)
                    for name, rule in _rules.items()})


def _loss_entry(name, rule, fallback):
    """A loss's class tile in one launch, where its array expressions make tile-sized
    temporaries (`fallback`: those expressions)."""
    return CompiledLoss(name, rule, fallback, elementwise_compiler(name, cuda_loss_source), cp,
                        dispatch=name not in AWAITING_GPU_CHECK)


KERNELS.update({name: _loss_entry(name, rule, KERNELS[name]) for name, rule in LOSSES.items()})
# cross_entropy_backward: this table's logsumexp, then the compiled step (as generic.py)
KERNELS.update({name: AfterLogsumexp(name, _loss_entry(name, rule, KERNELS[name].step), KERNELS,
                                     cp.empty) for name, rule in FROM_LSE.items()})
