"""The broadcast, indexed and loss rules' CUDA text (nntile_kernels/rules_cuda_broadcast.py,
rules_cuda_indexed.py) built for the host, each kernel called as CuPy calls an
ElementwiseKernel: what test_broadcast_rules_cpp.py and test_indexed_rules.py compare
with NumPy and the dispatch tests (test_compiled_broadcast.py, test_compiled_indexed.py,
test_compiled_loss.py) run, in place of a GPU."""

import ctypes

import numpy as np

from nntile_kernels import reference
from nntile_kernels.formulas import BROADCAST, FROM_LSE, INDEXED, LOSSES
from nntile_kernels.rules_cuda import C_TYPES, CUDA_PREAMBLE
from nntile_kernels.rules_cuda_broadcast import INDEX_SIZES, cuda_broadcast_source
from nntile_kernels.rules_cuda_indexed import (cuda_indexed_source, cuda_loss_source, id_arrays,
                                               index_sizes, integer_keywords)

_C_KINDS = {"float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool,
            "int64": ctypes.c_longlong}
# the losses' class-tile rules, by kernel name (a FROM_LSE rule is its kernel's step)
LOSS_RULES = {**LOSSES, **FROM_LSE}


def host_loop(name, dtype, params, loads, operation):
    """`extern "C" void <name>_<dtype>(<params>, long long n)`: a loop over i < n running
    `loads` then the kernel's `operation`, as an ElementwiseKernel's thread i does."""
    return (f'extern "C" void {name}_{dtype}({params}, long long n) {{\n'
            f"  for (long long i = 0; i < n; ++i) {{\n    {loads}\n    {operation}\n  }}\n}}\n")


def broadcast_function(name, dtype):
    """A C++ loop over the flat elements applying the kernel's operation text: element i
    of each full input and of the output at i, as an ElementwiseKernel's thread i."""
    broadcast, ctype = BROADCAST[name], C_TYPES[dtype]
    rule = broadcast.rule
    _, _, operation = cuda_broadcast_source(broadcast, dtype)
    params = ", ".join([f"const {ctype}* {arg}_partner" if arg in broadcast.partners
                        else f"const {ctype}* in_{arg}" for arg in rule.inputs]
                       + [f"long long {size}" for size in INDEX_SIZES[broadcast.shape]]
                       + [f"double {param}_f64" for param in rule.params])
    loads = " ".join(f"const {ctype} {arg} = in_{arg}[i];" for arg in rule.inputs
                     if arg not in broadcast.partners)
    return host_loop(name, dtype, f"{params}, {ctype}* out",
                     f"{loads} {ctype}& {rule.output} = out[i];", operation)


def indexed_function(name, dtype):
    """A C++ loop over the elements (or pairs) applying the kernel's operation text."""
    indexed, ctype = INDEXED[name], C_TYPES[dtype]
    _, _, operation = cuda_indexed_source(indexed, dtype)
    arrays = []
    for arg in indexed.inputs:
        kind = "bool" if arg in indexed.booleans else ctype
        arrays.append(f"const {kind}* {arg}_partner" if arg in indexed.partners
                      else f"const {ctype}* {'' if indexed.paired else 'in_'}{arg}")
    params = ", ".join([*arrays, *(f"long long {size}" for size in index_sizes(indexed)),
                        *(f"double {param}_f64" for param in indexed.params),
                        *(f"long long {offset}" for offset in indexed.offsets)])
    out = indexed.output
    if indexed.paired:
        loads, output = "", f"{ctype}* {out}"
    else:
        loads = " ".join(f"const {ctype} {arg} = in_{arg}[i];" for arg in indexed.inputs
                         if arg not in indexed.partners) + f" {ctype}& {out} = out[i];"
        output = f"{ctype}* out"
    return host_loop(name, dtype, f"{params}, {output}", loads, operation)


def loss_function(name, dtype):
    """A C++ loop over the logits' elements applying the loss kernel's operation text:
    columns and scalars raw pointers (labels int64), the logits and output at i."""
    indexed, ctype = LOSS_RULES[name], C_TYPES[dtype]
    _, _, operation = cuda_loss_source(indexed, dtype)
    apart, ids = (*indexed.columns, *indexed.scalars), id_arrays(indexed)
    arrays = [f"const {'long long' if arg in ids else ctype}* "
              f"{arg + '_raw' if arg in apart else 'in_' + arg}" for arg in indexed.inputs]
    params = ", ".join([*arrays, *(f"long long {size}" for size in index_sizes(indexed)),
                        *(f"double {param}_f64" for param in indexed.params),
                        *(f"long long {key}" for key in integer_keywords(indexed))])
    loads = " ".join(f"const {ctype} {arg} = in_{arg}[i];" for arg in indexed.inputs
                     if arg not in apart) + f" {ctype}& {indexed.output} = out[i];"
    return host_loop(name, dtype, f"{params}, {ctype}* out", loads, operation)


def host_source(rules, function):
    """Each of `rules`' host `function` for every float dtype, after the preamble."""
    return CUDA_PREAMBLE + "".join(function(name, dtype) for name in rules for dtype in C_TYPES)


class HostKernel:
    """One host function called in an ElementwiseKernel's convention: the inputs, the
    scalars, then the output; `arrays` are (name, raw, dtype) of each input then of the
    output, an elementwise one 1-d of the output's size, a raw one 1-d (all raw: the
    launch's `size` given, as CuPy wants). It refuses anything else, as CuPy would, and
    records in `calls` each call's dtype and whether the output was passed as one of
    the elementwise inputs (CuPy's in-place case)."""

    def __init__(self, function, dtype, arrays, scalar_types, calls=None):
        self.function, self.dtype = function, dtype
        self.arrays, self.scalar_types = arrays, scalar_types
        self.calls = [] if calls is None else calls

    def __call__(self, *args, size=None):
        inputs, scalars, out = args[:len(self.arrays) - 1], args[len(self.arrays) - 1:-1], args[-1]
        assert [type(s) for s in scalars] == list(self.scalar_types), args
        all_raw = all(raw for _, raw, _ in self.arrays)
        assert (size is not None) == all_raw, "CuPy sizes a launch of raw arrays only by `size`"
        for (name, raw, dtype), array in zip(self.arrays, (*inputs, out)):
            assert isinstance(array, np.ndarray) and array.dtype == np.dtype(dtype), name
            assert array.ndim == 1 and array.flags.c_contiguous, (name, array.shape)
            assert raw or array.size == out.size, (name, array.size, out.size)
        # CuPy would copy an input overlapping the output first: in place means the same view
        assert not any(array is not out and np.may_share_memory(array, out) for array in inputs)
        self.calls.append((self.dtype, any(array is out for array in inputs)))
        self.function(*[a.ctypes.data_as(ctypes.POINTER(_C_KINDS[a.dtype.name])) for a in inputs],
                      *(ctypes.c_longlong(s) if type(s) is int else ctypes.c_double(s)
                        for s in scalars),
                      out.ctypes.data_as(ctypes.POINTER(_C_KINDS[self.dtype])),
                      ctypes.c_longlong(out.size if size is None else size))


def broadcast_kernel(library, name, dtype, calls=None):
    """The host build of broadcast rule `name`'s kernel: the inputs (partners raw), the
    int64 sizes, the float64 params, then the output."""
    broadcast = BROADCAST[name]
    rule = broadcast.rule
    arrays = [(a, a in broadcast.partners, dtype) for a in rule.inputs] + [(rule.output, False,
                                                                           dtype)]
    scalars = [int] * len(INDEX_SIZES[broadcast.shape]) + [float] * len(rule.params)
    return HostKernel(getattr(library, f"{name}_{dtype}"), dtype, arrays, scalars, calls)


def indexed_kernel(library, name, dtype, calls=None):
    """The host build of indexed rule `name`'s kernel: the inputs (partners raw, bool
    ones bool; paired, all raw), the int64 sizes, the float64 params, the int64
    offsets, then the output."""
    indexed = INDEXED[name]
    arrays = [(a, indexed.paired or a in indexed.partners,
               "bool" if a in indexed.booleans else dtype) for a in indexed.inputs]
    arrays.append((indexed.output, indexed.paired, dtype))
    scalars = ([int] * len(index_sizes(indexed)) + [float] * len(indexed.params)
               + [int] * len(indexed.offsets))
    return HostKernel(getattr(library, f"{name}_{dtype}"), dtype, arrays, scalars, calls)


def loss_kernel(library, name, dtype, calls=None):
    """The host build of loss rule `name`'s kernel: the inputs (columns and scalars raw,
    labels int64), the int64 sizes, the float64 params, the int64 integer keywords,
    then the output."""
    indexed = LOSS_RULES[name]
    apart, ids = (*indexed.columns, *indexed.scalars), id_arrays(indexed)
    arrays = [(a, a in apart, "int64" if a in ids else dtype) for a in indexed.inputs]
    arrays.append((indexed.output, False, dtype))
    scalars = ([int] * len(index_sizes(indexed)) + [float] * len(indexed.params)
               + [int] * len(integer_keywords(indexed)))
    return HostKernel(getattr(library, f"{name}_{dtype}"), dtype, arrays, scalars, calls)


def host_entry(entry_class, rules, host_kernel, library, name, fallback=None, dispatch=True):
    """(`entry_class` (CompiledBroadcast, CompiledIndexed) of `rules[name]` whose stand-in
    compiler gives the host kernel `host_kernel(library, name, dtype, calls)`, NumPy its
    array module; the kernels' recorded `calls`). Without a `fallback`, taking it fails."""
    calls = []

    def compiler(rule, dtype):
        assert rule is rules[name]     # the host library is built from the registry
        return host_kernel(library, name, dtype, calls)

    def no_fallback(*arrays, **keywords):
        raise AssertionError(f"{name} took the fallback")

    return entry_class(name, rules[name], fallback or no_fallback, compiler, np,
                       dispatch=dispatch), calls


def run_both(kernel, name, arrays, out_is, keywords, expected=None):
    """`kernel` and the reference (`expected`, or the reference table's `name`; 16-bit
    tiles: on fp32 copies) on copies of `arrays`, the output the copy of input `out_is`
    where given (in place); both outputs rounded to the tiles' dtype, in float64."""
    results = []
    for table, wide in ((kernel, False), (expected or reference.KERNELS[name], True)):
        copies = [a.astype(np.float32) if wide and a.dtype.itemsize == 2 else a.copy(order="F")
                  for a in arrays]
        if out_is is not None:
            copies[-1] = copies[out_is]
        table(*copies, **keywords)
        results.append(copies[-1].astype(arrays[-1].dtype).astype(np.float64))
    return results


def assert_fallback_takes(library, entry, name, cases):
    """Each (why, arrays, keywords) of `cases` reaches `entry(library, name, fallback)`'s
    fallback as it came (the same arrays, the same keywords), and no kernel."""
    taken = []
    kernel, calls = entry(library, name, lambda *a, **k: taken.append((a, k)))
    for why, arrays, keywords in cases:
        kernel(*arrays, **keywords)
        assert not calls, why
        (got_arrays, got_keywords), = taken
        assert all(a is b for a, b in zip(got_arrays, arrays, strict=True)), why
        assert got_keywords == keywords, why
        taken.clear()
