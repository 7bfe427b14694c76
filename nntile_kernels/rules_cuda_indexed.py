"""The indexed rules (formulas/) as C++: the operation of a CuPy ElementwiseKernel,
one per rule and float dtype.

Unpaired, the kernel runs over a tile's elements in memory order (1-d views, as
cuda_attention.memory_order gives): element i's position along axis a is (i / (n0 *
... * n(a-1))) % na, n0, n1, ... the tile's leading sizes, and a partner of `lead`
elements is read at i % lead. Paired, it runs over the pairs: every array is raw, pair
i is (x[2 i], x[2 i + 1]), and its partners' entry is i % lead. A case is C++'s ?:, so
only the chosen value is read.

cuda.py compiles it into each rule's table entry (compiled_indexed.CompiledIndexed),
held back until a GPU check has run it (compiled_rules.AWAITING_GPU_CHECK): meanwhile
the entries run CuPy array expressions, the causal mask cuda_attention.py's kernel,
whose operation the text of mask_causal here is (the same index arithmetic and
condition).

A loss's class tile (LOSSES, FROM_LSE's step after the table's logsumexp:
cuda_loss_source) runs over the logits' elements in memory order too: its class
position is i % n0, its columns (lse, labels: one per token, the dims after the class
axis) are raw and read at the element's column i / n0, its 0-d scalars (dloss,
count) raw at [0], so they stay on the device; the labels are int64, as the check
that reads them wants (compiled_indexed.CompiledLoss runs it before the launch).

tests/kernels/test_indexed_rules.py compiles this C++ for the host and compares it
with the NumPy evaluation of the same text, and test_compiled_indexed.py (the losses:
test_compiled_loss.py) dispatches to that build. Pure Python, imports nothing heavy.
"""

from .rules_cuda import C_TYPES, _cpp_chosen, _cpp_typed, typed_literals


def position_index(axis):
    """The element's index along leading `axis`, from its index i in memory order."""
    if axis == 0:
        return "i % n0"
    return f"(i / ({' * '.join(f'n{a}' for a in range(axis))})) % n{axis}"


def index_sizes(indexed):
    """The int64 sizes the kernel reads after its arrays: n0, n1, ... or lead."""
    if indexed.positions:
        return tuple(f"n{axis}" for _, axis in indexed.positions)
    return ("lead",) if indexed.partners else ()


def _array_params(indexed, dtype_name):
    """The kernel's array params: partners raw (bool ones bool), tiles raw when paired."""
    params = []
    for name in indexed.inputs:
        kind = "bool" if name in indexed.booleans else dtype_name
        if name in indexed.partners:
            params.append(f"raw {kind} {name}_partner")
        else:
            params.append(f"{'raw ' if indexed.paired else ''}{kind} {name}")
    return params


def cuda_indexed_source(indexed, dtype_name):
    """(in_params, out_params, operation) of a CuPy ElementwiseKernel for one float dtype:
    the arrays, the int64 sizes of index_sizes, the params (float64), then the offsets
    (int64)."""
    ctype = C_TYPES[dtype_name]
    in_params = ", ".join([*_array_params(indexed, dtype_name),
                           *(f"int64 {size}" for size in index_sizes(indexed)),
                           *(f"float64 {name}_f64" for name in indexed.params),
                           *(f"int64 {name}" for name in indexed.offsets)])
    lines = [f"const long long {name} = {position_index(axis)};"
             for name, axis in indexed.positions]
    lines += [f"const {'bool' if name in indexed.booleans else ctype} {name} = "
              f"{name}_partner[i % lead];" for name in indexed.partners]
    lines += _cpp_typed(ctype, indexed.params, ())
    sign = "+=" if indexed.accumulate else "="
    out = indexed.output
    if indexed.paired:
        lines += [f"const {ctype} {name}{half} = {name}[2 * i{' + 1' if half else ''}];"
                  for name in indexed.inputs if name not in indexed.partners for half in (0, 1)]
        lines += [f"const {ctype} new{half} = {typed_literals(text, ctype)};"
                  for half, text in enumerate(indexed.values)]
        lines += [f"{out}[2 * i] {sign} new0;", f"{out}[2 * i + 1] {sign} new1;"]
        return in_params, f"raw {dtype_name} {out}", "\n".join(lines)
    value = f"({typed_literals(indexed.values[0], ctype)})"
    for condition, case in reversed(indexed.cases):
        value = f"({condition}) ? ({typed_literals(case, ctype)}) : {value}"
    lines.append(f"{out} {sign} {value};")
    return in_params, f"{dtype_name} {out}", "\n".join(lines)


def id_arrays(indexed):
    """The int64 arrays of a loss: those its checks read (the labels, ids of classes)."""
    return tuple(dict.fromkeys(check.array for check in indexed.checks))


def integer_keywords(indexed):
    """The int64 keywords a loss's kernel reads after its params: offsets, integers."""
    return (*indexed.offsets, *(name for name, _ in indexed.integers))


def cuda_loss_source(indexed, dtype_name):
    """(in_params, out_params, operation) of the CuPy ElementwiseKernel of a loss's class
    tile for one float dtype: the inputs (columns and scalars raw, ids int64), the int64
    sizes of the position axes, the params (float64), then integer_keywords (int64)."""
    ctype = C_TYPES[dtype_name]
    ids, apart = id_arrays(indexed), (*indexed.columns, *indexed.scalars)
    sizes = index_sizes(indexed)
    kinds = {name: "int64" if name in ids else dtype_name for name in indexed.inputs}
    in_params = ", ".join([*(f"raw {kinds[name]} {name}_raw" if name in apart
                             else f"{kinds[name]} {name}" for name in indexed.inputs),
                           *(f"int64 {size}" for size in sizes),
                           *(f"float64 {name}_f64" for name in indexed.params),
                           *(f"int64 {name}" for name in integer_keywords(indexed))])
    cpp = {name: "long long" if name in ids else ctype for name in indexed.inputs}
    # a token's column: its index over the dims after the positions, in memory order
    lines = [f"const long long {name} = {position_index(axis)};"
             for name, axis in indexed.positions]
    lines.append(f"const long long column_ = i / ({' * '.join(sizes)});")
    lines += [f"const {cpp[name]} {name} = {name}_raw[column_];" for name in indexed.columns]
    lines += [f"const {cpp[name]} {name} = {name}_raw[0];" for name in indexed.scalars]
    lines += _cpp_typed(ctype, indexed.params, indexed.let)
    value = _cpp_chosen(indexed.cases, indexed.values[0], indexed.params, ctype)
    lines.append(f"{indexed.output} {'+=' if indexed.accumulate else '='} {value};")
    return in_params, f"{dtype_name} {indexed.output}", "\n".join(lines)
