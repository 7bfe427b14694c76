"""The broadcast rules (formulas/) as C++: the operation of a CuPy
ElementwiseKernel over a tile's elements in memory order, one per rule and float dtype.

The full tiles are the kernel's elementwise operands (1-d views in memory order, as
cuda_attention.memory_order gives); a partner is a raw array in its own memory order,
read at the index of element i's partner: of a slice, i % inner + inner * (i / (inner *
length)); of a fiber, (i / inner) % length + length * (i / (inner * length * outer)),
inner the product of the dims before `axis`, length its size, outer the product of the
dims after it up to the batch dims (layout.fiber_folds' m, n, k); a 0-d partner's, 0.

cuda.py compiles it into each op's table entry (compiled_broadcast.CompiledBroadcast),
held back until a GPU check has run it (compiled_rules.AWAITING_GPU_CHECK): meanwhile
the entries take CuPy array expressions (add_slice the fused store, the softmax from a
logsumexp and its backward cuda_attention.py's kernels, whose index arithmetic this
is). tests/kernels/test_broadcast_rules_cpp.py compiles this C++ for the host and
compares it with the NumPy evaluation of the same text, and
test_compiled_broadcast.py dispatches to that build. Pure Python, imports nothing heavy.
"""

from .rules_cuda import C_TYPES, _cpp_chosen, _cpp_typed

PARTNER_INDEX = {
    "slice": "i % inner + inner * (i / (inner * length))",
    "fiber": "(i / inner) % length + length * (i / (inner * length * outer))",
    "scalar": "0",
}
# the int64 sizes each shape's partner index reads, after the arrays
INDEX_SIZES = {"slice": ("inner", "length"), "fiber": ("inner", "length", "outer"),
               "scalar": ()}


def cuda_broadcast_source(broadcast, dtype_name):
    """(in_params, out_params, operation) of a CuPy ElementwiseKernel for one float dtype:
    the full inputs, each partner raw as `<name>_partner`, the int64 sizes of
    INDEX_SIZES, then the params (float64)."""
    rule, ctype = broadcast.rule, C_TYPES[dtype_name]
    arrays = [f"raw {dtype_name} {name}_partner" if name in broadcast.partners
              else f"{dtype_name} {name}" for name in rule.inputs]
    params = ", ".join([*arrays, *(f"int64 {size}" for size in INDEX_SIZES[broadcast.shape]),
                        *(f"float64 {name}_f64" for name in rule.params)])
    lines = [f"const long long partner = {PARTNER_INDEX[broadcast.shape]};"]
    lines += [f"const {ctype} {name} = {name}_partner[partner];" for name in rule.inputs
              if name in broadcast.partners]
    lines += _cpp_typed(ctype, rule.params, rule.let)
    lines.append(f"{rule.output} {'+=' if rule.accumulate else '='} "
                 f"{_cpp_chosen(rule.cases, rule.value, rule.params, ctype)};")
    return params, f"{dtype_name} {rule.output}", "\n".join(lines)
