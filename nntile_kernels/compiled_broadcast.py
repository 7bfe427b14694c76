"""A broadcast rule (formulas/) compiled for a GPU: one kernel per float dtype over
the tiles in memory order (rules_cuda_broadcast.py writes its C++), 16-bit tiles
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
table entry takes the fallback (compiled_rules.AWAITING_GPU_CHECK). The indexed rules'
entries (compiled_indexed.py) share this dispatch (CompiledInMemoryOrder).
"""

import numbers

import numpy as np

from .compiled_rules import INT64
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


class CompiledInMemoryOrder:
    """A table entry running a rule's kernel over its tiles in memory order: one kernel
    per float dtype (`compiled[dtype name]`), 16-bit tiles through the fp32 one. A
    subclass says what it takes (`plan`: the int64 sizes of its index arithmetic and the
    params, or None for the fallback), the scalars its kernel reads after them and its
    entry's `signature`."""

    def __init__(self, name, rule, fallback, compile_kernel, xp, dispatch=True):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(rule)
        self.__signature__ = self.signature(rule)
        self.rule, self.fallback, self.dispatch, self._xp = rule, fallback, dispatch, xp
        self.compiled = {dtype: compile_kernel(rule, dtype) for dtype in C_TYPES}
        self.by_dtype = {dtype: self._launcher(kernel) for dtype, kernel in self.compiled.items()}
        # one output, the last array; the copies are Fortran-ordered, as the kernel wants
        through_fp32 = widened(self.by_dtype["float32"], num_outputs=1, xp=xp)
        self.by_dtype.update({dtype.name: through_fp32 for dtype in HALF})

    def _launcher(self, kernel):
        """kernel(*arrays, sizes=..., **params) on Fortran-ordered tiles, in CuPy's order."""
        def launch(*arrays, sizes, **params):
            views = memory_order_views(arrays)
            kernel(*views[:-1], *sizes, *self.scalars(params), views[-1],
                   **self.launch_options(arrays[-1]))
        return launch

    def launch_options(self, out):
        """CuPy's keywords of a launch on output `out` (none: its size is the output's)."""
        return {}

    def tiles_fit(self, arrays, names, booleans=(), ids=()):
        """Are `arrays` (named `names`) Fortran-contiguous arrays of one float dtype that
        a kernel takes, bool where their name is in `booleans`, int64 in `ids`?"""
        if len(arrays) != len(names) or not all(isinstance(a, self._xp.ndarray) for a in arrays):
            return False
        dtype = arrays[-1].dtype
        kinds = {**{name: dtype for name in names}, **{name: np.dtype(bool) for name in booleans},
                 **{name: INT64 for name in ids}}
        return dtype.name in self.by_dtype and all(
            array.flags.f_contiguous and array.dtype == kinds[name]
            for name, array in zip(names, arrays))

    def check(self, arrays, keywords):
        """Raise where the rule's checks fail, before the launch (none but a loss's)."""

    def __call__(self, *arrays, **keywords):
        plan = self.plan(arrays, dict(keywords)) if self.dispatch else None
        if plan is None:
            self.fallback(*arrays, **keywords)
            return
        self.check(arrays, keywords)
        sizes, params = plan
        self.by_dtype[arrays[-1].dtype.name](*arrays, sizes=sizes, **params)


class CompiledBroadcast(CompiledInMemoryOrder):
    """The kernel table entry of one Broadcast."""

    signature = staticmethod(broadcast_signature)

    def __init__(self, name, broadcast, fallback, compile_kernel, xp, dispatch=True):
        self.broadcast = broadcast
        super().__init__(name, broadcast, fallback, compile_kernel, xp, dispatch)

    def scalars(self, params):
        rule = self.broadcast.rule
        given = given_params(self.__name__, rule, params)
        return [float(given[name]) for name in rule.params]

    def plan(self, arrays, params):
        """(sizes, params) where the kernel takes these arrays as they are, else None."""
        shape, rule = self.broadcast.shape, self.broadcast.rule
        axis = params.pop("axis", None) if shape != "scalar" else None
        batch_ndim = params.pop("batch_ndim", 0) if shape == "fiber" else 0
        names = (*rule.inputs, rule.output)
        if not self.tiles_fit(arrays, names):
            return None
        out = arrays[-1]
        expected = partner_shape(self.broadcast, out.shape, axis, batch_ndim)
        if expected is None or any(
                array.shape != (expected if name in self.broadcast.partners else out.shape)
                for name, array in zip(names, arrays)):
            return None
        return index_sizes(self.broadcast, out.shape, axis, batch_ndim), params
