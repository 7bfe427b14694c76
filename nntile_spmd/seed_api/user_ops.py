"""Seed API: register_op, the public way to add an op (NNTile 2.0's OpSpec registry).

A registered op is an ordinary registry entry (graph/registry.py's OpSpec) whose kernels
join the backends' tables under "user_<name>": the planner tiles it from its axes,
lowers it to tasks, places and moves its tiles, autodiff calls its backward rule, and
compile's fingerprint check covers it, as for a built-in op. Its builder becomes
nt.ops.<name> and a LogicalGraph method.

- infer(*inputs, **attrs): each input a (shape, dtype) pair; returns the output's
  (shape, dtype), or a list of them. Its positional parameters are the inputs, its
  keyword parameters (with defaults) the op's attributes.
- kernels: {"reference": f, "cpu": f, "cuda": f (optional)}, each called on tiles as
  f(*input_tiles, *output_tiles, **attrs) and writing the outputs in place; the
  attributes are keyword-only parameters of the reference kernel, each of a type the
  kernels' calling convention declares (alpha: a real, axis: an int, ...;
  plan/kernel_params.py PARAM_TYPES).
- axes(attrs, in_shapes, out_shapes): one label tuple per array (registry.py says how
  labels are read); default elementwise (every array the same axes).
- backward(op, ctx): adds the ops of the inputs' gradients (as graph/<family>/rules.py
  do: ctx.needs(t), ctx.grad(t)); None: nt.grad raises if a gradient must pass it.
- flops(*in_shapes, **attrs) -> FLOPs of one call on the whole tensors (default 0).
"""

from __future__ import annotations

import functools
import inspect

from nntile_kernels import get_kernels

from ..graph import ops
from ..graph.apply import apply
from ..graph.checks import elementwise_axes
from ..graph.logical_graph import LogicalGraph
from ..graph.registry import REGISTRY, OpSpec
from ..graph.seed_methods import builder_method
from ..plan.kernel_params import PARAM_TYPES

REQUIRED_BACKENDS = ("reference", "cpu")
KERNEL_PREFIX = "user_"


def register_op(name: str, infer, kernels: dict, backward=None, flops=None, axes=None,
                num_outputs: int = 1):
    """Add op `name` (see the module's docstring); returns its builder
    f(*inputs, name, **attrs), also nt.ops.<name> and LogicalGraph.<name>."""
    check_new_op(name, kernels)
    parameters = inspect.signature(infer).parameters.values()
    inputs = [p.name for p in parameters if p.default is p.empty
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    attrs = {p.name: p.default for p in parameters if p.default is not p.empty}
    check_attrs(name, attrs, kernels["reference"])
    spec = OpSpec(name=name, kernel=KERNEL_PREFIX + name, num_inputs=len(inputs),
                  num_outputs=num_outputs, infer=functools.partial(inferred, infer),
                  axes=axes or elementwise_axes, attrs=attrs,
                  flops=(lambda a, i, o: int(flops(*i, **a))) if flops else
                  (lambda a, i, o: 0),
                  backward=backward)
    REGISTRY[name] = spec
    for backend, kernel in kernels.items():
        table = backend_table(backend)
        if table is not None:
            table[spec.kernel] = kernel
    builder = make_builder(name, inputs, attrs)
    setattr(ops, name, builder)
    setattr(LogicalGraph, name, builder_method(name, builder))
    return builder


def check_new_op(name, kernels):
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"register_op: the name {name!r} must be an identifier")
    if name in REGISTRY or hasattr(ops, name) or hasattr(LogicalGraph, name):
        raise ValueError(f"register_op: {name!r} is already an op or graph method")
    missing = [b for b in REQUIRED_BACKENDS if not callable(kernels.get(b))]
    unknown = set(kernels) - {"reference", "cpu", "cuda"}
    if missing or unknown:
        raise ValueError(f"register_op {name}: kernels must map 'reference' and 'cpu' (and "
                         f"optionally 'cuda') to functions; missing {missing}, unknown "
                         f"{sorted(unknown)}")


def check_attrs(name, attrs, reference):
    untyped = [attr for attr in attrs if attr not in PARAM_TYPES]
    if untyped:
        raise ValueError(f"register_op {name}: attribute(s) {untyped} have no type in the "
                         f"kernels' calling convention; use names among {sorted(PARAM_TYPES)}")
    declared = {p.name for p in inspect.signature(reference).parameters.values()
                if p.kind is p.KEYWORD_ONLY}
    if declared != set(attrs):
        raise ValueError(f"register_op {name}: the reference kernel's keyword-only "
                         f"parameters {sorted(declared)} must be the attributes "
                         f"{sorted(attrs)}")


def backend_table(backend):
    """The backend's kernel table, or None where it cannot load (cuda without CuPy)."""
    try:
        return get_kernels(backend)
    except (ImportError, RuntimeError, OSError):   # no CuPy, or no usable GPU
        return None


def inferred(infer, op, attrs, inputs) -> list:
    """The OpSpec's infer from the user's: [(shape tuple, dtype), ...]."""
    result = infer(*[(t.shape, t.dtype) for t in inputs], **attrs)
    outputs = [result] if isinstance(result[1], str) else list(result)
    return [(tuple(shape), dtype) for shape, dtype in outputs]


def make_builder(op_name, inputs, attrs):
    signature = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in inputs]
        + [inspect.Parameter("name", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(a, inspect.Parameter.KEYWORD_ONLY, default=d)
           for a, d in attrs.items()])

    def builder(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        return apply(op_name, [given[p] for p in inputs], [given["name"]],
                     **{a: given[a] for a in attrs})

    builder.__signature__ = signature
    builder.__name__ = builder.__qualname__ = op_name
    builder.__doc__ = f"The registered op {op_name} (nt.register_op)."
    builder.__module__ = "nntile_spmd.graph.user_ops"
    return builder


def unregister_op(name: str) -> None:
    """Remove a registered op (tests keep the process's tables as they found them)."""
    spec = REGISTRY.pop(name)
    for backend in ("reference", "cpu", "cuda"):
        table = backend_table(backend)
        if table is not None:
            table.pop(spec.kernel, None)
    delattr(ops, name)
    delattr(LogicalGraph, name)
