"""Graph layer: LogicalGraph, what to compute (tensors and ops in program order).

No tiles, no ranks: plan/ derives those. Imports no numba, cupy or mpi4py.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from . import analysis, export
from .registry import OpSpec, check_aliasing, describe_all, get_spec, op_error
from .scalars import check_scalar_attrs
from .seed_methods import SeedGraphMethods, install_builder_methods
from .tensor import TensorNode

PHASES = ("forward", "backward", "optimizer")


@dataclass(eq=False)
class OpNode:
    """One op: its type, operand tensors, attributes and the phase it belongs to."""

    id: int
    name: str
    op_type: str
    inputs: tuple
    outputs: tuple
    attrs: dict = field(default_factory=dict)
    phase: str = "forward"

    @property
    def spec(self) -> OpSpec:
        return get_spec(self.op_type)

    @property
    def reads(self) -> tuple:
        """Tensors whose values the op reads (inputs, and outputs it accumulates into)."""
        if self.spec.reads_output(self.attrs):
            return self.inputs + self.outputs
        return self.inputs

    def __repr__(self) -> str:
        return (f"{self.name} = {self.op_type}({describe_all(self.inputs)}) -> "
                f"({describe_all(self.outputs)})")


class LogicalGraph(SeedGraphMethods):
    """A symbolic computation graph; ops run in the order they were added. The seed's
    names (input, parameter, output, matmul, every nt.ops builder as a method, ...) come
    from SeedGraphMethods (seed_methods.py)."""

    def __init__(self, name: str):
        self.name = name
        self._tensors: dict[str, TensorNode] = {}
        self._tensor_list: list[TensorNode] = []
        self._ops: list[OpNode] = []
        self._op_names: set[str] = set()
        self._phase = "forward"
        self._output_names: dict[str, TensorNode] = {}   # output(t, name)'s names

    # -- tensors ---------------------------------------------------------------
    def tensor(self, shape, name: str, dtype: str = "fp32", requires_grad: bool = False,
               persistent: bool = False, external: bool = False) -> TensorNode:
        """Declare a tensor; its role follows from requires_grad/persistent/external."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"tensor name must be a non-empty string, got {name!r}")
        if name in self._tensors:
            raise ValueError(f"tensor name {name!r} is already used in graph {self.name!r}")
        node = TensorNode(self, len(self._tensor_list), name, tuple(shape), dtype,
                          requires_grad, persistent, external, is_input=external)
        self._tensors[name] = node
        self._tensor_list.append(node)
        return node

    def get_tensor(self, key) -> TensorNode:
        """Look a tensor up by name or by id."""
        try:
            return self._tensor_list[key] if isinstance(key, int) else self._tensors[key]
        except (KeyError, IndexError):
            raise KeyError(f"graph {self.name!r} has no tensor {key!r}") from None

    def has_tensor(self, name: str) -> bool:
        return name in self._tensors

    def tensors(self) -> list[TensorNode]:
        """All tensors in creation order."""
        return list(self._tensor_list)

    # -- ops -------------------------------------------------------------------
    def ops(self) -> list[OpNode]:
        """All ops in program order."""
        return list(self._ops)

    def get_op(self, key) -> OpNode:
        """Look an op up by name or by id."""
        for op in self._ops:
            if op.name == key or op.id == key:
                return op
        raise KeyError(f"graph {self.name!r} has no op {key!r}")

    @contextlib.contextmanager
    def phase(self, name: str):
        """Tag the ops added inside the block with phase `name`."""
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; expected one of {PHASES}")
        previous, self._phase = self._phase, name
        try:
            yield self
        finally:
            self._phase = previous

    def add_op(self, op_type: str, inputs, outputs, attrs=None, name=None,
               phase=None) -> OpNode:
        """Validate and append one op; the single entry point of every builder."""
        spec = get_spec(op_type)
        attrs = spec.normalize_attrs(dict(attrs or {}))
        check_scalar_attrs(spec, attrs)
        inputs, outputs = tuple(inputs), tuple(outputs)
        self.check_operands(spec, inputs, outputs)
        return self.add_inferred_op(op_type, inputs, outputs, attrs,
                                    spec.infer(op_type, attrs, inputs), name, phase)

    def add_inferred_op(self, op_type, inputs, outputs, attrs, expected, name=None,
                        phase=None) -> OpNode:
        """add_op once attributes are normalized and checked, operands checked and the
        outputs' (shape, dtype) inferred as `expected` (apply() infers them first to
        create the outputs, so they are not inferred twice)."""
        for output, want in zip(outputs, expected):
            if want is not None and (output.shape, output.dtype) != tuple(want):
                shape, dtype = want
                raise op_error(op_type, f"output {output.name} must be "
                               f"{list(shape)}:{dtype}", inputs + outputs,
                               TypeError if output.shape == shape else ValueError)
        # after the shape rules, whose errors say more about a wrong operand
        check_aliasing(get_spec(op_type), inputs, outputs)
        name = name or f"{op_type}_{len(self._ops)}"
        if name in self._op_names:
            raise ValueError(f"op name {name!r} is already used in graph {self.name!r}")
        phase = phase or self._phase
        if phase not in PHASES:
            raise ValueError(f"{op_type}: unknown phase {phase!r}; expected one of {PHASES}")
        op = OpNode(len(self._ops), name, op_type, inputs, outputs, attrs, phase)
        self._ops.append(op)
        self._op_names.add(name)
        return op

    def check_operands(self, spec, inputs, outputs, partial_outputs=False):
        """Operand count, types and graph ownership (before anything is created)."""
        inputs, outputs = tuple(inputs), tuple(outputs)
        count_ok = len(outputs) <= spec.num_outputs if partial_outputs else \
            len(outputs) == spec.num_outputs
        if len(inputs) != spec.num_inputs or not count_ok:
            raise TypeError(f"{spec.name}: takes {spec.num_inputs} input(s) and "
                            f"{spec.num_outputs} output(s), got {len(inputs)} and "
                            f"{len(outputs)}")
        for tensor in inputs + outputs:
            if not isinstance(tensor, TensorNode):
                raise TypeError(f"{spec.name}: operand {tensor!r} is not a TensorNode")
            if tensor.graph is not self:
                raise ValueError(f"{spec.name}: tensor {tensor.name} belongs to graph "
                                 f"{tensor.graph.name!r}, not {self.name!r}")
        if len(set(map(id, outputs))) != len(outputs):
            raise ValueError(f"{spec.name}: the same tensor is given twice as an output "
                             f"({describe_all(outputs)})")

    # -- copies, composition, symbols -------------------------------------------
    def clone(self, name: str | None = None) -> LogicalGraph:
        """An independent copy with the same tensors, flags and ops."""
        return self._replay(name or self.name, {})

    def bind(self, symbols: dict) -> LogicalGraph:
        """A concrete copy with symbolic dimensions replaced by sizes."""
        for symbol, size in symbols.items():
            if not isinstance(size, int) or size <= 0:
                raise ValueError(f"symbol {symbol!r} must be bound to a positive int, "
                                 f"got {size!r}")
        return self._replay(self.name, symbols)

    def symbols(self) -> set:
        """Names of the symbolic dimensions still unbound."""
        return {dim for t in self._tensor_list for dim in t.shape if isinstance(dim, str)}

    def _replay(self, name, symbols) -> LogicalGraph:
        graph = LogicalGraph(name)
        for tensor in self._tensor_list:
            copy_tensor_into(graph, tensor, tensor.name, symbols)
        for op in self._ops:
            graph.add_op(op.op_type, [graph.get_tensor(t.name) for t in op.inputs],
                         [graph.get_tensor(t.name) for t in op.outputs], op.attrs,
                         op.name, op.phase)
        graph._output_names = {name: graph.get_tensor(t.name)
                               for name, t in self._output_names.items()}
        return graph

    def embed(self, subgraph: LogicalGraph, input_bindings: dict, prefix: str) -> dict:
        """Copy `subgraph` in, its tensors renamed prefix+name, with some bound to ours.

        input_bindings maps subgraph tensor names to tensors of this graph; returns
        a dict from subgraph tensor names to this graph's tensors.
        """
        unknown = set(input_bindings) - {t.name for t in subgraph.tensors()}
        if unknown:
            raise KeyError(f"embed: subgraph {subgraph.name!r} has no tensor(s) "
                           f"{sorted(unknown)}")
        mapping = {}
        for tensor in subgraph.tensors():
            bound = input_bindings.get(tensor.name)
            if bound is not None:
                if bound.graph is not self or bound.shape != tensor.shape \
                        or bound.dtype != tensor.dtype:
                    raise ValueError(f"embed: {bound.describe()} cannot stand for "
                                     f"{tensor.describe()}")
                mapping[tensor.name] = bound
            else:
                mapping[tensor.name] = copy_tensor_into(self, tensor, prefix + tensor.name, {})
        for op in subgraph.ops():
            self.add_op(op.op_type, [mapping[t.name] for t in op.inputs],
                        [mapping[t.name] for t in op.outputs], op.attrs,
                        prefix + op.name, op.phase)
        return mapping

    # -- analysis (analysis.py) -------------------------------------------------
    def num_operations(self) -> int:
        """Number of ops."""
        return analysis.num_operations(self)

    def num_parameters(self) -> int:
        """Elements of the tensors whose role is "parameter"."""
        return analysis.num_parameters(self)

    def estimate_flops(self) -> int:
        """FLOPs of one execution (sum of the ops' registered costs)."""
        return analysis.estimate_flops(self)

    def estimate_parameter_memory(self) -> int:
        """Bytes of the parameters."""
        return analysis.estimate_parameter_memory(self)

    def estimate_activation_memory(self) -> int:
        """Bytes of op-written tensors neither persistent nor external (none freed)."""
        return analysis.estimate_activation_memory(self)

    def dead_ops(self) -> list[OpNode]:
        """Ops whose results reach no output and no persistent tensor."""
        return analysis.dead_ops(self)

    def summary(self) -> str:
        """Counts and estimates in a few lines of text."""
        return analysis.summary(self)

    # -- export (export.py) ----------------------------------------------------
    def to_dot(self) -> str:
        """Graphviz DOT text (tensors coloured by role)."""
        return export.to_dot(self)

    def to_mermaid(self) -> str:
        """Mermaid flowchart text (tensors coloured by role)."""
        return export.to_mermaid(self)

    def to_json(self) -> dict:
        """The graph as a plain, json.dumps-able dict."""
        return export.to_json(self)

    def render(self, path) -> None:
        """Draw the graph with graphviz; the format comes from the extension of `path`."""
        export.render(self, path)

    def save(self, path) -> None:
        """Write the graph as JSON to `path` (atomically)."""
        export.save(self, path)

    @classmethod
    def from_json(cls, data: dict) -> LogicalGraph:
        """Rebuild a graph from to_json() output, validating every op."""
        return export.from_json(data, cls)

    @classmethod
    def load(cls, path) -> LogicalGraph:
        """Read a graph written by save()."""
        return export.load(path, cls)

    def __repr__(self) -> str:
        return (f"LogicalGraph({self.name!r}, {len(self._tensor_list)} tensors, "
                f"{len(self._ops)} ops)")


def copy_tensor_into(graph, tensor, name, symbols) -> TensorNode:
    """Declare a copy of `tensor` in `graph` (flags kept, symbols substituted)."""
    shape = tuple(symbols.get(dim, dim) if isinstance(dim, str) else dim
                  for dim in tensor.shape)
    copy = graph.tensor(shape, name, tensor.dtype, tensor.requires_grad,
                        tensor.persistent, tensor.external)
    copy.is_input, copy.is_output, copy.grad_of = (tensor.is_input, tensor.is_output,
                                                   tensor.grad_of)
    copy.parallel_dim, copy.copy_of = tensor.parallel_dim, tensor.copy_of
    copy.causal_dims = tensor.causal_dims
    return copy


install_builder_methods(LogicalGraph)   # g.gelu(x), g.softmax(x, axis=0), ... (seed_methods.py)
