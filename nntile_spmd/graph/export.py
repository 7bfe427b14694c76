"""Graph layer: export of a LogicalGraph to DOT, Mermaid and JSON, and JSON save/load.

Builds text and plain dicts; only render() runs a program (graphviz's `dot`).
Imports nothing from plan/ or runtime/ and no numba, cupy or mpi4py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from typing import TYPE_CHECKING

from .scalars import Scalar
from .tensor import ROLE_COLORS

if TYPE_CHECKING:
    from .logical_graph import LogicalGraph, OpNode
    from .tensor import TensorNode

FORMAT = "nntile_spmd.graph"
VERSION = 1
OP_COLOR = "#ffffcc"
TENSOR_FLAGS = ("requires_grad", "persistent", "external", "is_input", "is_output",
                "grad_of", "parallel_dim", "copy_of", "causal_dims")
PLAIN_TYPES = (bool, int, float, str)


# -- labels ----------------------------------------------------------------------
def tensor_label(tensor: TensorNode) -> str:
    """The seed's tensor label: name, [shape], dtype on three lines."""
    dims = ", ".join(str(dim) for dim in tensor.shape)
    return f"{tensor.name}\n[{dims}]\n{tensor.dtype}"


def op_label(op: OpNode) -> str:
    """Op name and type; the phase too where it is not the default forward."""
    phase = "" if op.phase == "forward" else f"\n({op.phase})"
    return f"{op.name}\n{op.op_type}{phase}"


def accumulated(op: OpNode) -> list[TensorNode]:
    """Outputs the op reads before writing that are not also inputs (gemm beta=1...)."""
    return [tensor for tensor in op.reads if tensor not in op.inputs]


# -- DOT -------------------------------------------------------------------------
def dot_quote(text: str) -> str:
    """A DOT quoted string; newlines become DOT's \\n escape."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def to_dot(graph: LogicalGraph) -> str:
    """Graphviz DOT text: tensors as boxes coloured by role, ops as yellow ellipses."""
    lines = [f"digraph {dot_quote(graph.name)} {{", '  node [fontname="Helvetica"];']
    for tensor in graph.tensors():
        lines.append(f"  t{tensor.id} [label={dot_quote(tensor_label(tensor))}, "
                     f'shape=box, style=filled, fillcolor="{ROLE_COLORS[tensor.role]}"];')
    for op in graph.ops():
        lines.append(f"  op{op.id} [label={dot_quote(op_label(op))}, shape=ellipse, "
                     f'style=filled, fillcolor="{OP_COLOR}"];')
        lines += [f"  t{tensor.id} -> op{op.id};" for tensor in op.inputs]
        lines += [f"  t{tensor.id} -> op{op.id} [style=dashed];" for tensor in accumulated(op)]
        lines += [f"  op{op.id} -> t{tensor.id};" for tensor in op.outputs]
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- Mermaid ---------------------------------------------------------------------
def mermaid_quote(text: str) -> str:
    """A Mermaid quoted label: entity codes for specials, <br/> for newlines."""
    for char, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        text = text.replace(char, code)
    return '"' + text.replace("\n", "<br/>") + '"'


def to_mermaid(graph: LogicalGraph) -> str:
    """Mermaid flowchart text in the same colours (ops as stadiums, Mermaid's ellipse)."""
    lines = ["flowchart TD"]
    lines += [f"  t{tensor.id}[{mermaid_quote(tensor_label(tensor))}]"
              for tensor in graph.tensors()]
    for op in graph.ops():
        lines.append(f"  op{op.id}([{mermaid_quote(op_label(op))}])")
        lines += [f"  t{tensor.id} --> op{op.id}" for tensor in op.inputs]
        lines += [f"  t{tensor.id} -.-> op{op.id}" for tensor in accumulated(op)]
        lines += [f"  op{op.id} --> t{tensor.id}" for tensor in op.outputs]
    # Class names are prefixed because bare words such as `end` are Mermaid keywords.
    lines += [f"  classDef role_{role} fill:{color},stroke:#333"
              for role, color in ROLE_COLORS.items()]
    lines.append(f"  classDef op_node fill:{OP_COLOR},stroke:#333")
    for tensor in graph.tensors():
        lines.append(f"  class t{tensor.id} role_{tensor.role}")
    if graph.ops():
        lines.append(f"  class {','.join(f'op{op.id}' for op in graph.ops())} op_node")
    return "\n".join(lines) + "\n"


# -- JSON ------------------------------------------------------------------------
def plain_value(op: OpNode, key: str, value):
    """An attribute as a JSON-able Python scalar (NumPy scalars are unwrapped); a tuple
    of ints (a shape or an offset, as randn's start) as a list."""
    if value is None or type(value) in PLAIN_TYPES:
        return value
    if type(value) is tuple and all(type(item) is int for item in value):
        return list(value)
    if isinstance(value, Scalar):
        return {"scalar": value.name, "default": value.default, "factor": value.factor}
    if callable(getattr(value, "item", None)) and getattr(value, "ndim", None) == 0:
        return plain_value(op, key, value.item())
    raise TypeError(f"{op.name}: attribute {key}={value!r} is not a bool, int, float "
                    "or str, so the graph cannot be written as JSON")


def json_value(value):
    """A flag as JSON holds it (causal_dims' tuple as a list)."""
    return list(value) if isinstance(value, tuple) else value


def to_json(graph: LogicalGraph) -> dict:
    """The graph as a plain dict that json.dumps accepts and from_json reads back."""
    tensors = [{"name": tensor.name, "shape": list(tensor.shape), "dtype": tensor.dtype,
                "role": tensor.role} | {flag: json_value(getattr(tensor, flag))
                                        for flag in TENSOR_FLAGS}
               for tensor in graph.tensors()]
    ops = [{"name": op.name, "type": op.op_type, "phase": op.phase,
            "inputs": [tensor.name for tensor in op.inputs],
            "outputs": [tensor.name for tensor in op.outputs],
            "attrs": {key: plain_value(op, key, value) for key, value in op.attrs.items()}}
           for op in graph.ops()]
    return {"format": FORMAT, "version": VERSION, "name": graph.name,
            "tensors": tensors, "ops": ops}


def from_json(data: dict, graph_type: type) -> LogicalGraph:
    """Rebuild a graph of class `graph_type`; ops are replayed through add_op."""
    check_header(data)
    try:
        graph = graph_type(data["name"])
        for entry in data["tensors"]:
            declare_tensor(graph, entry)
        for entry in data["ops"]:
            graph.add_op(entry["type"], [graph.get_tensor(name) for name in entry["inputs"]],
                         [graph.get_tensor(name) for name in entry["outputs"]],
                         read_attrs(entry["attrs"]), entry["name"], entry["phase"])
    except KeyError as error:  # a missing field, or an op naming an unknown tensor
        raise ValueError(f"malformed {FORMAT} document: {error}") from error
    return graph


def read_attrs(attrs: dict) -> dict:
    """Attributes of a document; a {"scalar": ...} entry becomes the runtime Scalar and a
    list the tuple of ints it was written from."""
    return {key: Scalar(value["scalar"], value["default"], value["factor"])
            if isinstance(value, dict) else tuple(value) if isinstance(value, list) else value
            for key, value in attrs.items()}


def check_header(data) -> None:
    """Reject documents of another format or version."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    if data.get("version") != VERSION:
        raise ValueError(f"{FORMAT} version {data.get('version')!r} is not supported "
                         f"(this code reads version {VERSION})")


def declare_tensor(graph: LogicalGraph, entry: dict) -> TensorNode:
    """Declare one tensor of a document with all its flags."""
    tensor = graph.tensor(entry["shape"], entry["name"], entry["dtype"],
                          entry["requires_grad"], entry["persistent"], entry["external"])
    tensor.is_input, tensor.is_output = entry["is_input"], entry["is_output"]
    tensor.grad_of = entry["grad_of"]
    tensor.parallel_dim = entry.get("parallel_dim")   # absent in older documents
    tensor.copy_of = entry.get("copy_of")
    causal_dims = entry.get("causal_dims")   # a JSON list; absent in older documents
    tensor.causal_dims = None if causal_dims is None else tuple(causal_dims)
    # The role is derived from the flags; a disagreeing one means an edited file.
    if "role" in entry and entry["role"] != tensor.role:
        raise ValueError(f"tensor {tensor.name}: stored role {entry['role']!r} "
                         f"disagrees with its flags ({tensor.role!r})")
    return tensor


def save(graph: LogicalGraph, path) -> None:
    """Write to_json(graph) to `path` atomically."""
    # Python's json writes inf/nan attrs (fill value=-inf) as Infinity/NaN and reads
    # them back, which round-trips exactly; strict JSON parsers reject them.
    text = json.dumps(to_json(graph), indent=1) + "\n"
    atomic_write(path, text.encode())


def read(path) -> dict:
    """The JSON document stored at `path`."""
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def load(path, graph_type: type) -> LogicalGraph:
    """Read a graph written by save(); malformed documents raise ValueError."""
    return from_json(read(path), graph_type)


def atomic_write(path, payload: bytes) -> None:
    """Write `payload` to a temp file beside `path`, then os.replace it into place."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".tmp-",
                                    suffix="-" + os.path.basename(path))
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        # mkstemp makes the file private (0600); keep the mode of the file replaced.
        mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


# -- rendering -------------------------------------------------------------------
def render(graph: LogicalGraph, path) -> None:
    """Draw the graph into `path`, the format taken from its extension (.svg, .png...)."""
    extension = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    if not extension:
        raise ValueError(f"render: {os.fspath(path)!r} has no extension to tell the format "
                         "(use .svg, .png, .pdf, .dot or .mmd)")
    if extension in ("dot", "gv", "mmd"):  # text formats need no graphviz
        text = to_mermaid(graph) if extension == "mmd" else to_dot(graph)
        atomic_write(path, text.encode())
        return
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError(f"render: writing {os.fspath(path)!r} needs graphviz (the `dot` "
                           "executable is not on PATH); install graphviz, or write "
                           "to_dot() text / a .dot file instead")
    result = subprocess.run([dot, f"-T{extension}"], input=to_dot(graph).encode(),
                            capture_output=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"render: `dot -T{extension}` failed: "
                           f"{result.stderr.decode(errors='replace').strip()}")
    atomic_write(path, result.stdout)
