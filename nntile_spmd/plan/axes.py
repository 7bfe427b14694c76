"""Plan layer: axis classes. A union-find over (tensor, dim) merges the dims each
op's axis map labels alike, so one tiling per class keeps every op's operands aligned.

Imports the graph layer only (no runtime, no MPI).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AxisClass:
    """One axis shared by several tensor dims; `whole` axes must stay in one tile."""

    id: int
    size: int
    members: tuple          # ((tensor_name, dim), ...) sorted
    whole: bool

    def __repr__(self) -> str:
        first = ", ".join(f"{name}:{dim}" for name, dim in self.members[:3])
        more = "..." if len(self.members) > 3 else ""
        return f"Axis{self.id}(size={self.size}, {first}{more}{', whole' if self.whole else ''})"


class UnionFind:
    def __init__(self):
        self.parent = {}

    def find(self, item):
        parent = self.parent.setdefault(item, item)
        if parent != item:
            parent = self.parent[item] = self.find(parent)
        return parent

    def union(self, first, second):
        root_first, root_second = self.find(first), self.find(second)
        if root_first != root_second:
            # keep the smaller item as root so the classes are deterministic
            low, high = sorted((root_first, root_second))
            self.parent[high] = low


def op_axes(op):
    """Label tuples of an op's kernel arrays (inputs, then outputs)."""
    in_shapes = [t.shape for t in op.inputs]
    out_shapes = [t.shape for t in op.outputs]
    return op.spec.axes(op.attrs, in_shapes, out_shapes)


def axis_classes(graph) -> tuple[list[AxisClass], dict]:
    """All axis classes of `graph` and the map (tensor_name, dim) -> class id."""
    union_find = UnionFind()
    whole_members = set()
    for tensor in graph.tensors():
        for dim in range(tensor.ndim):
            union_find.find((tensor.name, dim))
    for op in graph.ops():
        axes = op_axes(op)
        arrays = op.inputs + op.outputs
        first_member = {}
        whole = op.spec.whole(op.attrs, axes)
        for tensor, tensor_labels in zip(arrays, axes):
            assert len(tensor_labels) == tensor.ndim, f"{op.name}: axis map of {tensor.name}"
            for dim, label in enumerate(tensor_labels):
                member = (tensor.name, dim)
                union_find.union(first_member.setdefault(label, member), member)
                if label in whole:
                    whole_members.add(member)
    return build_classes(graph, union_find, whole_members)


def build_classes(graph, union_find, whole_members):
    groups = {}
    for tensor in graph.tensors():
        for dim in range(tensor.ndim):
            groups.setdefault(union_find.find((tensor.name, dim)), []).append((tensor.name, dim))
    classes, class_of = [], {}
    for root in sorted(groups, key=lambda item: (graph.get_tensor(item[0]).id, item[1])):
        members = tuple(groups[root])
        sizes = {graph.get_tensor(name).shape[dim] for name, dim in members}
        assert len(sizes) == 1, f"axis class {members} has sizes {sizes}"
        whole = any(member in whole_members for member in members)
        axis_class = AxisClass(len(classes), sizes.pop(), members, whole)
        classes.append(axis_class)
        for member in members:
            class_of[member] = axis_class.id
    return classes, class_of
