"""Graph layer: apply(), the one generic op builder every free function in ops uses.

Kept apart from ops.py so that the families' builder modules (reductions/ops.py, ...)
and ops.py, which re-exports them as `nntile_spmd.ops`, import it without a cycle.
"""

from __future__ import annotations

from .registry import get_spec, op_error
from .scalars import check_scalar_attrs
from .tensor import TensorNode


def apply(op_type: str, inputs, outputs, **attrs):
    """Add op `op_type`; an output given as a str is created with that name."""
    inputs = tuple(inputs)
    graph = owner_graph(op_type, inputs, outputs)
    spec = get_spec(op_type)
    graph.check_operands(spec, inputs, [t for t in outputs if not isinstance(t, str)],
                         partial_outputs=True)
    normalized = spec.normalize_attrs(attrs)
    check_scalar_attrs(spec, normalized)
    if spec.beta_attr and normalized[spec.beta_attr] != 0 and \
            any(isinstance(output, str) for output in outputs):
        names = [repr(output) for output in outputs if isinstance(output, str)]
        raise op_error(op_type, f"{spec.beta_attr}={normalized[spec.beta_attr]} needs an "
                       f"existing output to accumulate into, not a new tensor {names[0]}",
                       inputs)
    expected = spec.infer(op_type, normalized, inputs)
    created = []
    for output, want in zip(outputs, expected):
        if isinstance(output, str):
            if want is None:
                raise op_error(op_type, f"output {output!r} must be an existing tensor")
            output = graph.tensor(want[0], output, want[1])
        created.append(output)
    graph.add_inferred_op(op_type, inputs, tuple(created), normalized, expected)
    return created[0] if len(created) == 1 else tuple(created)


def owner_graph(op_type, inputs, outputs):
    for tensor in (*inputs, *outputs):
        if isinstance(tensor, TensorNode):
            return tensor.graph
    raise op_error(op_type, "needs at least one TensorNode operand", (), TypeError)
