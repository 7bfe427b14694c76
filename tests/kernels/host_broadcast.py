"""The broadcast rules' CUDA text (nntile_kernels/rules_cuda_broadcast.py) built for the
host, each kernel called as CuPy calls an ElementwiseKernel: what
test_broadcast_rules_cpp.py compares with NumPy and test_compiled_broadcast.py
dispatches to, in place of a GPU."""

import ctypes

import numpy as np

from nntile_kernels.rules_broadcast import BROADCAST
from nntile_kernels.rules_cuda import C_TYPES, CUDA_PREAMBLE
from nntile_kernels.rules_cuda_broadcast import INDEX_SIZES, cuda_broadcast_source

_POINTERS = {"float32": ctypes.POINTER(ctypes.c_float),
             "float64": ctypes.POINTER(ctypes.c_double)}


def host_function(name, dtype):
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
    return (f'extern "C" void {name}_{dtype}({params}, {ctype}* out, long long n) {{\n'
            f"  for (long long i = 0; i < n; ++i) {{\n    {loads}\n"
            f"    {ctype}& {rule.output} = out[i];\n    {operation}\n  }}\n}}\n")


def host_source():
    """Every broadcast rule's host function for every float dtype, after the preamble."""
    return CUDA_PREAMBLE + "".join(host_function(name, dtype)
                                   for name in BROADCAST for dtype in C_TYPES)


class HostKernel:
    """One host function called in an ElementwiseKernel's convention: the rule's inputs
    (full tiles as 1-d arrays of the output's size, partners raw), the int sizes, the
    float params, then the 1-d output. It refuses anything else, as CuPy would, and
    records in `calls` each call's dtype and whether the output was passed as one of
    the full inputs (CuPy's in-place case)."""

    def __init__(self, library, name, dtype, calls=None):
        self.broadcast, self.dtype = BROADCAST[name], np.dtype(dtype)
        self.function = getattr(library, f"{name}_{dtype}")
        self.calls = [] if calls is None else calls

    def __call__(self, *args):
        rule, partners = self.broadcast.rule, self.broadcast.partners
        inputs, out = args[:len(rule.inputs)], args[-1]
        sizes = args[len(rule.inputs):len(rule.inputs) + len(INDEX_SIZES[self.broadcast.shape])]
        params = args[len(rule.inputs) + len(sizes):-1]
        assert len(params) == len(rule.params), args
        assert all(type(size) is int for size in sizes) and all(type(p) is float for p in params)
        for name, array in (*zip(rule.inputs, inputs), (rule.output, out)):
            assert isinstance(array, np.ndarray) and array.dtype == self.dtype, name
            assert array.ndim == 1 and array.flags.c_contiguous, (name, array.shape)
            assert name in partners or array.size == out.size, (name, array.size, out.size)
        full = [array for name, array in zip(rule.inputs, inputs) if name not in partners]
        # CuPy would copy an input overlapping the output first: in place means the same view
        assert not any(array is not out and np.may_share_memory(array, out) for array in inputs)
        in_place = any(array is out for array in full)
        self.calls.append((self.dtype.name, in_place))
        pointer = _POINTERS[self.dtype.name]
        self.function(*[array.ctypes.data_as(pointer) for array in inputs],
                      *map(ctypes.c_longlong, sizes), *map(ctypes.c_double, params),
                      out.ctypes.data_as(pointer), ctypes.c_longlong(out.size))
