"""The elementwise rules (formulas/) as C++: the operations of CuPy ElementwiseKernels (cuda.py,
cuda_fused.py compile them), one per rule and float dtype.

Pure Python, imports nothing heavy. tests/kernels/test_kernels_rules.py compiles this
C++ for the host and compares it with the NumPy evaluation of the same text.
"""

from .rules import CONSTANTS, FLOAT_LITERAL, computed_cases, renamed, skip_condition

# C++ has erf/exp/fabs/hypot/isfinite/log/log1p/pow/sqrt/tanh overloads for float and double; the
# rest are ours.
CUDA_PREAMBLE = """
template <typename W> __device__ W sigmoid(W x) { return W(1) / (W(1) + exp(-x)); }
template <typename W> __device__ W maximum(W a, W b) { return (a != a || a > b) ? a : b; }
template <typename W> __device__ W minimum(W a, W b) { return (a != a || a < b) ? a : b; }
template <typename W> __device__ W where(bool c, W a, W b) { return c ? a : b; }
"""


def typed_literals(text, ctype):
    """float kernels get 1.0f literals: a bare 1.0 is a double and would widen the math."""
    return FLOAT_LITERAL.sub(r"\1f", text) if ctype == "float" else text


# CuPy names a parameter's type by its NumPy dtype; the operation is C++.
C_TYPES = {"float32": "float", "float64": "double"}


def _cpp_chosen(cases, value, names, ctype):
    """A C++ expression choosing the first case whose condition holds: the conditions
    compare float64 scalars (name_f64), the values get the tile dtype's literals. Only
    the chosen value is evaluated, so the inputs the others name are not read."""
    text = f"({typed_literals(value, ctype)})"
    for condition, case_value in reversed(cases):
        text = (f"({renamed(condition, names, '{}_f64')}) ? "
                f"({typed_literals(case_value, ctype)}) : {text}")
    return text


def _cpp_typed(ctype, params, let):
    """The element scope's declarations: constants, params cast, then the let temps."""
    lines = [f"const {ctype} {name} = {value!r};" for name, value in CONSTANTS.items()]
    lines += [f"const {ctype} {name} = ({ctype}){name}_f64;" for name in params]
    lines += [f"const {ctype} {temp} = {text};" for temp, text in let]
    return [typed_literals(line, ctype) for line in lines]


def cuda_source(rule, dtype_name):
    """(in_params, out_params, operation) of a CuPy ElementwiseKernel for one float dtype:
    the inputs, then the params (float64), as arguments."""
    ctype = C_TYPES[dtype_name]
    params = ", ".join([f"{dtype_name} {name}" for name in rule.inputs]
                       + [f"float64 {name}_f64" for name in rule.params])
    lines = _cpp_typed(ctype, rule.params, rule.let)
    lines.append(f"{rule.output} {'+=' if rule.accumulate else '='} "
                 f"{_cpp_chosen(rule.cases, rule.value, rule.params, ctype)};")
    return params, f"{dtype_name} {rule.output}", "\n".join(lines)


def cuda_update_source(update, dtype_name):
    """(in_params, out_params, operation) of the CuPy ElementwiseKernel of an Update: the
    inputs, the counter (int64, 0-d), the params (float64), then the state in place.
    Each thread computes the uniform values itself, in double: one launch, and no
    wait for the counter that lives on the device. A tile whose skip case holds is
    assigned under `if`, so it is neither read nor written."""
    ctype = C_TYPES[dtype_name]
    uniform = tuple(name for name, _ in update.uniform)
    wide = (*update.params, update.counter, *uniform)
    in_params = ", ".join([f"{dtype_name} {name}" for name in update.inputs]
                          + [f"int64 {update.counter}_i64"]
                          + [f"float64 {name}_f64" for name in update.params])
    lines = [f"const double {update.counter}_f64 = (double){update.counter}_i64;"]
    lines += [f"const double {name}_f64 = {renamed(text, wide, '{}_f64')};"
              for name, text in update.uniform]
    lines += _cpp_typed(ctype, (*update.params, *uniform), update.let)
    for name, value, cases in update.assign:
        line = f"{name} = {_cpp_chosen(computed_cases(cases), value, wide, ctype)};"
        skip = skip_condition(cases)
        lines.append(line if skip is None else
                     f"if (!({renamed(skip, wide, '{}_f64')})) {line}")
    out_params = ", ".join(f"{dtype_name} {name}" for name in update.state)
    return in_params, out_params, "\n".join(lines)
