"""An elementwise rule (formulas/) compiled for a GPU: one kernel per float dtype, 16-bit
tiles through the fp32 kernel; an optimizer update compiled the same way, for fp32 and fp64 tiles.

fp32 and fp64 tiles run the rule's kernel compiled for their dtype. bf16 and fp16 tiles
run the fp32 kernel on fp32 copies, rounded to the tile's dtype on store (widen.py), the
numerics of the CPU: CuPy has no 16-bit math of its own that would compute in fp32.
Tiles of mixed dtypes, and integer tiles (add_scalar's step counters), take the rule's
array expressions (`fallback`). A kernel sees
Fortran-ordered tiles as their C-ordered transposes (layout.c_order_views). Arrays only, and
no CuPy: cuda.py passes its compiler and array module, so the dispatch is tested on
the CPU (tests/kernels/test_compiled_rules.py). A compiled kernel takes CuPy's
ElementwiseKernel order: the input arrays, the scalars, then the outputs.

A kernel built with `dispatch=False` is compiled and kept (`compiled`), so the GPU
tests run it against the reference, but its table entry takes the fallback: that is
how cuda.py holds back kernels whose text no GPU check has run yet.
"""

import numpy as np

from .layout import c_order_views
from .rules import given_params, rule_signature
from .rules_cuda import C_TYPES
from .widen import HALF, widened

# Rules, updates, broadcast and indexed rules (compiled_broadcast.py, compiled_indexed.py)
# whose kernel text was compiled and checked on the host only (tests/kernels build the
# C++ with the host compiler): their cuda table entries take the kernels they had before
# (the array expressions; for some broadcast and indexed rules cuda.py's one-launch
# kernels) until a run of scripts/gpu-check on a GPU passes their compiled kernels
# (tests/gpu runs those whatever this says); then they leave this set.
AWAITING_GPU_CHECK = frozenset({
    "pow", "pow_backward", "add_scalar", "sgd_step", "logsumexp_merge",
    # the broadcast rules (formulas.BROADCAST)
    "add_slice", "multiply_slice", "sumprod_slice_backward", "logsumexp_backward",
    "softmax_from_logsumexp", "softmax_from_logsumexp_backward", "add_fiber",
    "multiply_fiber", "sumprod_fiber_backward", "scale_slice", "sum_backward",
    "mse_backward", "scale_fiber", "norm_fiber_backward", "norm_slice_backward",
    "extremum_backward",
    # the indexed rules (formulas.INDEXED, compiled_indexed.py)
    "mask_scalar", "mask_causal", "rope", "rope_backward",
    # the cross-entropy backward's class tiles (compiled_indexed.CompiledLoss)
    "cross_entropy_lse_backward", "cross_entropy_backward"})


class CompiledRule:
    """The kernel table entry of one rule; `compiled[dtype name]` are its kernels."""

    def __init__(self, name, rule, fallback, compile_kernel, xp, dispatch=True):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(rule)
        self.__signature__ = rule_signature(rule)
        self.rule, self.fallback, self.dispatch = rule, fallback, dispatch
        self.compiled = {dtype: compile_kernel(rule, dtype) for dtype in C_TYPES}
        # a rule has one output, the last array (inputs first, then the output)
        through_fp32 = widened(self._launcher(self.compiled["float32"]), num_outputs=1, xp=xp)
        self.by_dtype = {dtype: self._launcher(kernel) for dtype, kernel in self.compiled.items()}
        self.by_dtype.update({dtype.name: through_fp32 for dtype in HALF})

    def _launcher(self, kernel):
        """kernel(*arrays, **params) in the table's convention, on the compiled kernel."""
        def launch(*arrays, **params):
            given = given_params(self.__name__, self.rule, params)
            kernel(*arrays[:-1], *(float(given[name]) for name in self.rule.params), arrays[-1])
        return launch

    def __call__(self, *arrays, **params):
        dtype = arrays[0].dtype
        same = all(array.dtype == dtype for array in arrays)
        kernel = self.by_dtype.get(dtype.name) if same and self.dispatch else None
        if kernel is None:
            self.fallback(*arrays, **params)
        else:                                       # the output written in place
            kernel(*c_order_views(arrays), **params)


INT64 = np.dtype(np.int64)


class CompiledUpdate:
    """The kernel table entry of one update (formulas.UPDATES): one launch per call on fp32
    or fp64 tiles of one dtype with a 0-d int64 counter, in place; anything else takes
    the update's array expressions (`fallback`)."""

    def __init__(self, name, update, fallback, compile_kernel, dispatch=True):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(update)
        self.__signature__ = rule_signature(update)
        self.update, self.fallback, self.dispatch = update, fallback, dispatch
        self.compiled = {dtype: compile_kernel(update, dtype) for dtype in C_TYPES}

    def __call__(self, counter, *arrays, **params):
        dtype = arrays[0].dtype
        kernel = self.compiled.get(dtype.name) if self.dispatch else None
        if (kernel is None or counter.dtype != INT64 or counter.ndim != 0
                or any(array.dtype != dtype for array in arrays)):
            self.fallback(counter, *arrays, **params)
            return
        given = given_params(self.__name__, self.update, params)
        arrays = c_order_views(arrays)
        inputs = len(self.update.inputs)
        kernel(*arrays[:inputs], counter, *(float(given[name]) for name in self.update.params),
               *arrays[inputs:])
