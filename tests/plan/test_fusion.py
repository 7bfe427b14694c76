"""Fusion (plan/fusion.py): fused programs compute bitwise what unfused ones do (fp64,
MLP and GPT-2 training steps, 1 and 3 simulated ranks, every preset, uneven tiles),
print their chains, and keep tiles only the chain uses in registers (less memory)."""

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.models.mlp import build_mlp
from nntile_spmd.train import add_optimizer

PRESETS = ("single", "ddp", "fsdp", "tp")


def run_steps(graph, bind, outputs, nranks, preset, tiling, fuse, steps=2):
    cg = nt.compile(graph, comm=nt.SimulatedWorld(nranks), distribution=preset,
                    tiling=tiling, fuse=fuse)
    bind(cg)
    for _ in range(steps):
        cg.execute()
    cg.check_stats()            # planned and measured bytes, FLOPs and peaks agree
    return cg, {name: cg.get_output(name) for name in outputs}


def assert_bitwise(unfused, fused):
    for name, value in unfused.items():
        assert np.array_equal(value, fused[name], equal_nan=True), name


@pytest.mark.parametrize("nranks", [1, 3])
@pytest.mark.parametrize("preset", PRESETS)
def test_mlp_training_step_is_bitwise_the_same_fused(nranks, preset):
    model = build_mlp([20, 16, 12, 5], 12, "fp64", "gelu")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-3, weight_decay=0.01)
    rng = np.random.default_rng(0)
    params = model.init_params(rng)
    x, y = rng.standard_normal((20, 12)), rng.integers(0, 5, 12)

    def bind(cg):
        for name, value in params.items():
            cg.bind_data(name, value)
        cg.bind_data("x", x)
        cg.bind_data("y", y)
    outputs = [p.name for p in model.params] + ["loss"]
    tiling = nt.TilingStrategy.manual({"x": [7, 5], "w1": [9, 7]})   # uneven tiles
    plain, unfused = run_steps(model.graph, bind, outputs, nranks, preset, tiling, False)
    cg, fused = run_steps(model.graph, bind, outputs, nranks, preset, tiling, True)
    assert_bitwise(unfused, fused)
    listing = "\n".join(cg.program(r) for r in range(nranks))
    assert "EXEC fused[clear(>2) gelu_backward(0,1>2)]" in listing
    # the clear of a2_grad is folded into its first gemm's beta
    assert "EXEC clear(->a2_grad" in "\n".join(plain.program(r) for r in range(nranks))
    assert "EXEC clear(->a2_grad" not in listing
    measured = set().union(*(cg.stats[r].by_op_type for r in range(nranks)))
    assert "fused(clear+gelu_backward)" in measured


@pytest.mark.parametrize("nranks", [1, 3])
@pytest.mark.parametrize("preset", PRESETS)
def test_gpt2_training_step_is_bitwise_the_same_fused(nranks, preset):
    cfg = gpt2.GPT2Config(vocab_size=32, n_positions=12, n_embd=16, n_layer=2, n_head=2)
    model = gpt2.build_gpt2(cfg, batch=3, seq=12, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-3, weight_decay=0.01)
    rng = np.random.default_rng(1)
    params = model.init_params(rng)
    ids = rng.integers(0, 32, (12, 3))

    def bind(cg):
        for name, value in params.items():
            cg.bind_data(name, value)
        cg.bind_data("input_ids", np.asfortranarray(ids))
        cg.bind_data("targets", np.asfortranarray(ids))
    outputs = [p.name for p in model.params] + ["loss", "logits"]
    tiling = nt.TilingStrategy.manual({"input_ids": [5, 2]})   # uneven sequence and batch
    _, unfused = run_steps(model.graph, bind, outputs, nranks, preset, tiling, False)
    cg, fused = run_steps(model.graph, bind, outputs, nranks, preset, tiling, True)
    assert_bitwise(unfused, fused)
    assert "fused[" in "\n".join(cg.program(r) for r in range(nranks))


def chain_graph():
    """t = x + y; u = gelu(t); v = 2 * u: t and u only feed the chain."""
    g = nt.LogicalGraph("chain")
    x = g.tensor([30, 20], "x", dtype="fp64", external=True)
    y = g.tensor([30, 20], "y", dtype="fp64", external=True)
    t = nt.ops.add(1.0, x, 1.0, y, "t")
    u = nt.ops.gelu(t, "u")
    nt.ops.scale(u, "v", alpha=2.0).mark_output(True)
    return g


@pytest.mark.parametrize("nranks", [1, 3])
def test_tiles_only_the_chain_uses_are_never_allocated(nranks):
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((30, 20)), rng.standard_normal((30, 20))

    def bind(cg):
        cg.bind_data("x", x)
        cg.bind_data("y", y)
    tiling = nt.TilingStrategy.manual({"x": [13, 20]})
    plain, unfused = run_steps(chain_graph(), bind, ["v"], nranks, "ddp", tiling, False)
    cg, fused = run_steps(chain_graph(), bind, ["v"], nranks, "ddp", tiling, True)
    assert_bitwise(unfused, fused)
    listing = cg.program(0)
    assert "EXEC fused[add(0,1>t0) gelu(t0>t1) scale(t1>2)](x[0,0],y[0,0]->v[0,0])" in listing
    assert "t[" not in listing and "u[" not in listing      # never tiles: no EXEC, no FREE
    fused_peaks = [cg.memory_on_rank(rank) for rank in range(nranks)]
    plain_peaks = [plain.memory_on_rank(rank) for rank in range(nranks)]
    # unfused, a tile of t or u (13 x 20 fp64) is live beside x, y and v; fused, neither is
    assert sum(fused_peaks) <= sum(plain_peaks) - 13 * 20 * 8, (fused_peaks, plain_peaks)
    assert [cg.stats[rank].peak_bytes for rank in range(nranks)] == fused_peaks  # measured


def test_fusion_is_off_by_default_and_the_env_var_turns_it_on(monkeypatch):
    monkeypatch.delenv("NNTILE_SPMD_FUSE", raising=False)
    assert "fused[" not in nt.compile(chain_graph(), comm=nt.SimulatedWorld(1)).program(0)
    monkeypatch.setenv("NNTILE_SPMD_FUSE", "1")
    assert "fused[" in nt.compile(chain_graph(), comm=nt.SimulatedWorld(1)).program(0)
    monkeypatch.setenv("NNTILE_SPMD_FUSE", "yes")
    with pytest.raises(ValueError, match="NNTILE_SPMD_FUSE"):
        nt.compile(chain_graph(), comm=nt.SimulatedWorld(1))


def test_a_device_without_generated_loops_runs_the_chain_kernel_by_kernel():
    """The stepwise fallback (any non-CPU device) with the NumPy reference kernels gives
    bitwise what those kernels give unfused, register temporaries included."""
    from nntile_kernels import get_kernels
    from nntile_spmd.runtime.device import Device
    from nntile_spmd.runtime.fused_kernels import kernel_table

    reference = get_kernels("reference")
    cg = nt.compile(chain_graph(), comm=nt.SimulatedWorld(1), fuse=True,
                    tiling=nt.TilingStrategy.manual({"x": [13, 20]}))
    fused = next(i for i in cg.plan.program(0) if i.kernel.startswith("fused["))
    table = kernel_table(Device("numpy", np, reference), cg.plan.program(0), {})
    rng = np.random.default_rng(3)
    x, y = (np.asfortranarray(rng.standard_normal((13, 20))) for _ in range(2))
    v = np.empty((13, 20), order="F")
    table[fused.kernel](x, y, v, **fused.params)
    t, u, expected = (np.empty((13, 20), order="F") for _ in range(3))
    reference["add"](x, y, t, alpha=1.0, beta=1.0)
    reference["gelu"](t, u)
    reference["scale"](u, expected, alpha=2.0)
    assert np.array_equal(v, expected)


def test_a_step_that_reads_one_tile_twice():
    """tanh's backward squares its output (multiply(out, out)): the tile is one operand."""
    g = nt.LogicalGraph("square")
    x = g.tensor([4, 5, 3], "x", "fp64", requires_grad=True, persistent=True)
    out = nt.ops.tanh_inplace(nt.ops.copy(x, "out")).mark_output()
    target = g.tensor([4, 5, 3], "target", "fp64", external=True)
    loss = nt.ops.mse_loss(out, target, "loss").mark_output()
    nt.grad(g, loss, [x])
    rng = np.random.default_rng(4)
    values = {"x": rng.standard_normal((4, 5, 3)), "target": rng.standard_normal((4, 5, 3))}

    def bind(cg):
        for name, value in values.items():
            cg.bind_data(name, value)
    tiling = nt.TilingStrategy.manual({"x": [3, 5, 2]})
    _, unfused = run_steps(g, bind, ["out", "x_grad"], 1, "single", tiling, False)
    cg, fused = run_steps(g, bind, ["out", "x_grad"], 1, "single", tiling, True)
    assert_bitwise(unfused, fused)
    assert "EXEC fused[multiply(0,0>t1) multiply(t1,1>t0)" in cg.program(0)
