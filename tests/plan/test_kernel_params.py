"""EXEC params are typed values: immutable and hashable KernelParams, whose names and
types are checked against the kernel's declaration when the op is lowered; fusion and
runtime scalars build new params instead of changing the plan's."""

import copy
import pickle
from dataclasses import replace

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.plan.instructions import Exec
from nntile_spmd.plan.kernel_params import PARAM_TYPES, KernelParams, declared_params
from nntile_spmd.plan.lowering import ViewReadingOp, lower_op
from nntile_spmd.plan.tiling import DimensionTiling, TilingSpec

from nntile_kernels import KERNEL_NAMES


def test_kernel_params_cannot_change():
    params = KernelParams(alpha=1.0, beta=0.0)
    for change in (lambda: params.__setitem__("beta", 1.0), lambda: params.pop("beta"),
                   lambda: params.update(beta=1.0), lambda: params.setdefault("x", 1),
                   lambda: params.clear(), lambda: params.popitem(),
                   lambda: params.__delitem__("alpha")):
        with pytest.raises(TypeError, match="cannot change"):
            change()
    with pytest.raises(TypeError, match="cannot change"):
        params |= {"beta": 1.0}
    assert params == {"alpha": 1.0, "beta": 0.0}
    changed = params.with_values(beta=1.0)
    assert type(changed) is KernelParams and changed["beta"] == 1.0 and params["beta"] == 0.0


def test_kernel_params_hash_pickle_and_copy_as_values():
    params = KernelParams(axis=1, x_offset=[0, 2], alpha=nt.Scalar("lr", 1e-3))
    same = KernelParams(alpha=nt.Scalar("lr", 1e-3), axis=1, x_offset=[0, 2])
    assert hash(params) == hash(same) and len({params, same}) == 1
    for copied in (pickle.loads(pickle.dumps(params)), copy.copy(params),
                   copy.deepcopy(params)):
        assert type(copied) is KernelParams and copied == params


def test_every_declared_kernel_param_has_a_type():
    names = set()
    for kernel in KERNEL_NAMES:
        names |= declared_params(kernel)[0]
    assert names - {"params"} <= set(PARAM_TYPES), sorted(names - set(PARAM_TYPES))


def gemm_graph():
    g = nt.LogicalGraph("gemm")
    a = g.tensor([4, 6], "A", dtype="fp64", external=True)
    b = g.tensor([6, 4], "B", dtype="fp64", external=True)
    nt.ops.gemm(a, b, "C", alpha=2.0).mark_output()
    return g


def lowered(op, **changes):
    """lower_op on `op` with its spec or attrs changed (an op the registry would hold)."""
    spec_changes = {k: v for k, v in changes.items() if k != "attrs"}
    proxy = ViewReadingOp(op.name, op.op_type, op.inputs, op.outputs,
                          changes.get("attrs", op.attrs), op.phase,
                          replace(op.spec, **spec_changes))
    tilings = {t.name: TilingSpec(tuple(DimensionTiling.uniform(size, 2) for size in t.shape))
               for t in op.inputs + op.outputs}
    return lower_op(proxy, tilings)


@pytest.mark.parametrize("changes,message", [
    ({"kernel": "add"}, r"'add' takes parameters \['alpha', 'beta'\]; got unknown "
                        r"\['batch_ndim', 'ndim', 'trans_a', 'trans_b'\], missing \[\]"),
    ({"kernel": "scale_slice", "kernel_attrs": ("alpha",)},
     r"'scale_slice' takes .* missing \['axis'\]"),
    ({"attrs": {"trans_a": 1}}, r"'gemm': parameter 'trans_a' must be a bool, got 1"),
    ({"attrs": {"alpha": "2"}}, r"parameter 'alpha' must be a real or a runtime Scalar"),
    ({"kernel": "no_such_kernel"}, r"'no_such_kernel' is not in the kernel tables"),
])
def test_a_wrong_parameter_is_refused_at_lowering_naming_op_and_kernel(changes, message):
    op = gemm_graph().ops()[0]
    if "attrs" in changes:
        changes = {"attrs": {**op.attrs, **changes["attrs"]}}
    with pytest.raises(TypeError, match=f"op {op.name!r} \\(gemm\\): kernel .*{message}"):
        lowered(op, **changes)


def test_the_lowered_params_are_checked_kernel_params():
    op = gemm_graph().ops()[0]
    groups = lowered(op)
    assert groups and all(type(step.params) is KernelParams
                          for group in groups for step in group.steps)


def adamw_mlp():
    from nntile_spmd.models import build_mlp
    from nntile_spmd.train import add_optimizer
    model = build_mlp([6, 5, 3], 4, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-2)
    return model


@pytest.mark.parametrize("fuse", [False, True])
def test_every_exec_of_a_training_plan_has_kernel_params(fuse):
    plan = nt.build_plan(adamw_mlp().graph, 3, nt.TilingStrategy.manual({"x": [4, 3]}),
                         "fsdp", fuse=fuse)
    execs = [i for program in plan.programs() for i in program if type(i) is Exec]
    assert execs and all(type(i.params) is KernelParams for i in execs)
    assert not fuse or any(i.kernel.startswith("fused[") for i in execs)


def test_runtime_scalars_give_new_params_and_leave_the_plans_alone():
    model = adamw_mlp()
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(2), distribution="ddp",
                    tiling=nt.TilingStrategy.manual({"x": [4, 3]}))
    for name, value in model.init_params(np.random.default_rng(0)).items():
        cg.bind_data(name, value)
    cg.bind_data("x", np.ones((6, 4)))
    cg.bind_data("y", np.zeros(4, dtype=np.int64))
    planned = [i for i in cg.plan.program(0) if type(i) is Exec and i.kernel == "adamw_step"]
    before = [dict(i.params) for i in planned]
    cg.set_scalar("lr", 0.5)
    cg.execute()
    assert [dict(i.params) for i in planned] == before
    assert all(type(i.params["lr"]) is nt.Scalar for i in planned)
    resolved = [i for resolved in cg.resolved.values() for i in resolved.program
                if type(i) is Exec and i.kernel == "adamw_step"]
    assert resolved and all(type(i.params) is KernelParams and i.params["lr"] == 0.5
                            for i in resolved)
