"""A rule of rules.py compiled for a GPU: one kernel per float dtype, 16-bit tiles through
the fp32 kernel.

fp32 and fp64 tiles run the rule's kernel compiled for their dtype. bf16 and fp16 tiles
run the fp32 kernel on fp32 copies, rounded to the tile's dtype on store (widen.py), the
numerics of the CPU: CuPy has no 16-bit math of its own that would compute in fp32.
Tiles of mixed dtypes take the rule's array expressions (`fallback`). A kernel sees
Fortran-ordered tiles as their C-ordered transposes (layout.c_order_views). Arrays only, and
no CuPy: cuda.py passes its compiler and array module, so the dispatch is tested on
the CPU (tests/kernels/test_compiled_rules.py).
"""

from .layout import c_order_views
from .rules import C_TYPES, rule_signature
from .widen import HALF, widened


class CompiledRule:
    """The kernel table entry of one rule; `compiled[dtype name]` are its kernels."""

    def __init__(self, name, rule, fallback, compile_kernel, xp):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = repr(rule)
        self.__signature__ = rule_signature(rule)
        self.rule, self.fallback = rule, fallback
        self.compiled = {dtype: compile_kernel(rule, dtype) for dtype in C_TYPES}
        # a rule has one output, the last array (inputs first, then the output)
        through_fp32 = widened(self.compiled["float32"], num_outputs=1, xp=xp)
        self.by_dtype = {**self.compiled, **{dtype.name: through_fp32 for dtype in HALF}}

    def __call__(self, *arrays):
        dtype = arrays[0].dtype
        same = all(array.dtype == dtype for array in arrays)
        kernel = self.by_dtype.get(dtype.name) if same else None
        if kernel is None:
            self.fallback(*arrays)
        else:                                       # the output written in place
            kernel(*c_order_views(arrays))
