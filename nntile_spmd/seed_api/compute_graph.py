"""Seed API: ComputeGraph, the seed's one-object form (§5.1, §5.2): a LogicalGraph whose
input/parameter take a shape, with a distribution and an ExecutionPolicy, instantiated
into an ExecutableGraph on the world in one call.

As seed §5.2 reads its result as get_tensor("output") without declaring an output:
if no output was declared, every tensor that ops write and none reads is one, and when
there is exactly one it is also reachable as "output". instantiate() creates the tiles
zeroed, inputs included (§5.2 executes without binding its input).
"""

from __future__ import annotations

from dataclasses import replace

from ..graph.logical_graph import LogicalGraph
from ..plan.offload import ExecutionPolicy
from ..runtime.limits import available_bytes
from ..graph.seed_methods import TensorSpec
from .executable import ExecutableGraph
from .physical import PhysicalGraph


class ComputeGraph(LogicalGraph):
    """LogicalGraph with the seed §5.1 signatures and instantiate()."""

    def __init__(self, name: str = "graph"):
        super().__init__(name or "graph")
        self.distribution_choice = "single"
        self.policy = None

    def input(self, shape, name=None, dtype: str = "fp32", requires_grad=False):
        spec = shape if isinstance(shape, TensorSpec) else \
            TensorSpec(shape, dtype, requires_grad)
        return super().input(spec, self.fresh_name("input", name))

    def parameter(self, shape, name=None, dtype: str = "fp32"):
        spec = shape if isinstance(shape, TensorSpec) else TensorSpec(shape, dtype)
        return super().parameter(spec, self.fresh_name("parameter", name))

    def set_distribution(self, strategy) -> None:
        """What nt.compile's distribution= takes (DistributionStrategy's factories)."""
        self.distribution_choice = strategy

    def set_execution_policy(self, policy: ExecutionPolicy) -> None:
        if not isinstance(policy, ExecutionPolicy):
            raise TypeError(f"set_execution_policy: expected an ExecutionPolicy, got {policy!r}")
        self.policy = policy

    def instantiate(self, ctx=None, comm=None, tiling=None, **options) -> ExecutableGraph:
        """Plan on the world (`comm`, or `ctx` in the seed's spelling; default
        MPI.COMM_WORLD) and allocate the tiles. Collective."""
        self.declare_default_outputs()
        physical = PhysicalGraph(self, comm=comm if comm is not None else ctx,
                                 policy=self.compile_policy(comm if comm is not None else ctx),
                                 **options)
        physical.set_tiling(tiling)
        physical.set_distribution(self.distribution_choice)
        return ExecutableGraph(physical.compile(), zero_inputs=True)

    def declare_default_outputs(self) -> None:
        if self.outputs():
            return
        read = {t.name for op in self.ops() for t in op.reads}
        written = [t for op in self.ops() for t in op.outputs]
        sinks = list({t.name: t for t in written
                      if t.name not in read and not t.persistent}.values())
        for tensor in sinks:
            self.output(tensor)
        if len(sinks) == 1 and not self.has_tensor("output"):
            self.output(sinks[0], "output")

    def compile_policy(self, comm):
        """The policy compile gets: offloading without a budget means within the
        memory this process has available (shared by the ranks it runs)."""
        policy = self.policy
        if policy is None or not policy.enable_offloading or policy.memory_budget:
            return policy
        # a World knows the ranks this process runs; an MPI communicator: this rank
        ranks_here = max(1, len(comm.local_ranks())) if hasattr(comm, "local_ranks") else 1
        budget = (available_bytes() or 0) // ranks_here
        if budget <= 0:   # nothing known: no offloading, the other fields kept
            return replace(policy, enable_offloading=False)
        return replace(policy, memory_budget=budget)
