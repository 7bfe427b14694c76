"""A broadcast rule of rules_broadcast.py compiled for a GPU: one kernel per float dtype
over the tiles in memory order (rules_cuda_broadcast.py writes its C++), 16-bit tiles
through the fp32 kernel (widen.py), as compiled_rules.CompiledRule does for the
elementwise rules.

The kernel's elementwise operands are the full tiles, each a 1-d view in memory order
(a Fortran-ordered tile's transpose is C-contiguous, so reshaping it is free); a
partner is a raw array read at its partner index, which needs the sizes inner, length
and outer of layout.fiber_folds. Anything the kernel's index arithmetic does not
describe takes the generic kernel (`fallback`): tiles that are not Fortran-contiguous,
of mixed or integer dtypes, partners whose shape is not the one `axis` and
`batch_ndim` give, an axis out of range. Arrays only, and no CuPy: cuda.py passes its
compiler and array module, so the dispatch runs on the CPU with the C++ built for the
host (tests/kernels/test_compiled_broadcast.py). A compiled kernel takes CuPy's
ElementwiseKernel order: the inputs (partners raw), the int64 sizes, the params, then
the output.

`dispatch=False` keeps the compiled kernels (`compiled`) for the GPU tests while the
table entry takes the fallback (compiled_rules.AWAITING_GPU_CHECK).
"""

import numbers

from .layout import fiber_folds
from .rules import given_params
from .rules_broadcast import broadcast_signature
from .rules_cuda import C_TYPES
from .rules_cuda_broadcast import INDEX_SIZES
from .widen import HALF, widened


def partner_shape(broadcast, shape, axis, batch_ndim):
    """The shape of a partner of a full tile of `shape` (what the generic kernel expands),
    or None where `axis` and `batch_ndim` do not fit that tile."""
    if broadcast.shape == "scalar":
        return ()
    ndim = len(shape)
    if broadcast.shape == "slice":
        fits = isinstance(axis, numbers.Integral) and 0 <= axis < ndim
        return shape[:axis] + shape[axis + 1:] if fits else None
    fits = (isinstance(axis, numbers.Integral) and isinstance(batch_ndim, numbers.Integral)
            and 0 <= batch_ndim and 0 <= axis < ndim - batch_ndim)
    return (shape[axis], *shape[ndim - batch_ndim:]) if fits else None


def index_sizes(broadcast, shape, axis, batch_ndim):
    """The int64 sizes (INDEX_SIZES) of the partner index on a full tile of `shape`."""
    if broadcast.shape == "scalar":
        return ()
    inner, length, outer, _ = fiber_folds(shape, axis, batch_ndim)
    sizes = {"inner": inner, "length": length, "outer": outer}
    return tuple(sizes[name] for name in INDEX_SIZES[broadcast.shape])


def memory_order_views(arrays):
    """Each array's elements in memory order, a 1-d view; an array passed twice (the
    output in place of an input) gets one view, so that CuPy sees an in-place kernel,
    not an output overlapping another input (which it would copy first)."""
    views = {}
    for array in arrays:
        if id(array) not in views:
            views[id(array)] = array.T.reshape(-1)
    return [views[id(array)] for array in arrays]


class CompiledBroadcast:
    """The kernel table entry of one Broadcast; `compiled[dtype name]` are its kernels."""

    def __init__(self, name, broadcast, fallback, compile_kernel, xp, dispatch=True):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(broadcast)
        self.__signature__ = broadcast_signature(broadcast)
        self.broadcast, self.fallback, self.dispatch, self._xp = broadcast, fallback, dispatch, xp
        self.compiled = {dtype: compile_kernel(broadcast, dtype) for dtype in C_TYPES}
        self.by_dtype = {dtype: self._launcher(kernel) for dtype, kernel in self.compiled.items()}
        # one output, the last array; the copies are Fortran-ordered, as the kernel wants
        through_fp32 = widened(self.by_dtype["float32"], num_outputs=1, xp=xp)
        self.by_dtype.update({dtype.name: through_fp32 for dtype in HALF})

    def _launcher(self, kernel):
        """kernel(*arrays, sizes=..., **params) on Fortran-ordered tiles, in CuPy's order."""
        rule = self.broadcast.rule

        def launch(*arrays, sizes, **params):
            given = given_params(self.__name__, rule, params)
            views = memory_order_views(arrays)
            kernel(*views[:-1], *sizes, *(float(given[name]) for name in rule.params),
                   views[-1])
        return launch

    def takes(self, arrays, axis, batch_ndim) -> bool:
        """Does the compiled kernel take these arrays as they are?"""
        rule, partners = self.broadcast.rule, self.broadcast.partners
        names = (*rule.inputs, rule.output)
        if len(arrays) != len(names) or not all(isinstance(a, self._xp.ndarray) for a in arrays):
            return False
        out = arrays[-1]
        expected = partner_shape(self.broadcast, out.shape, axis, batch_ndim)
        return (expected is not None and out.dtype.name in self.by_dtype
                and all(array.dtype == out.dtype and array.flags.f_contiguous
                        and array.shape == (expected if name in partners else out.shape)
                        for name, array in zip(names, arrays)))

    def __call__(self, *arrays, **keywords):
        params = dict(keywords)
        axis = params.pop("axis", None) if self.broadcast.shape != "scalar" else None
        batch_ndim = params.pop("batch_ndim", 0) if self.broadcast.shape == "fiber" else 0
        if not (self.dispatch and self.takes(arrays, axis, batch_ndim)):
            self.fallback(*arrays, **keywords)
            return
        sizes = index_sizes(self.broadcast, arrays[-1].shape, axis, batch_ndim)
        self.by_dtype[arrays[-1].dtype.name](*arrays, sizes=sizes, **params)
