"""A small bf16 layer with a loss and gradients, and its NumPy reference (fp32 arithmetic,
every stored tensor rounded to bf16), shared by the single-process and MPI tests."""

import ml_dtypes
import numpy as np
from helpers import gelu
from scipy.special import erf

import nntile_spmd as nt
from nntile_spmd.graph.dtypes import storage_dtype

BF16 = np.dtype(ml_dtypes.bfloat16)
PRESETS = ("single", "ddp", "fsdp", "tp")
# K split 4 + 3 (gemm's partial sums meet in bf16 tiles), batch 3 + 3 + 3 + 1
TILING = {"x": [4, 3], "w": [3, 4]}
OUTPUTS = ("a", "loss", "dw", "db")


def layer_graph(dtype):
    """a = gelu(w x + b), loss = sum(a), and d loss / d (w, b)."""
    g = nt.LogicalGraph(f"layer_{dtype}")
    x = g.tensor([7, 10], "x", dtype=dtype, external=True)
    w = g.tensor([5, 7], "w", dtype=dtype, requires_grad=True, persistent=True)
    b = g.tensor([5], "b", dtype=dtype, requires_grad=True, persistent=True)
    z = nt.ops.add_fiber(1.0, b, 1.0, nt.ops.gemm(w, x, "h"), "z", axis=0)
    a = nt.ops.gelu(z, "a").mark_output()
    nt.ops.sum(a, "loss").mark_output()
    dw, db = nt.grad(g, g.get_tensor("loss"), [w, b])
    return g, dw.name, db.name


def layer_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((7, 10)), "w": rng.standard_normal((5, 7)) * 0.5,
            "b": rng.standard_normal(5) * 0.1}


def reference(values):
    """fp32 arithmetic on bf16 values, each stored tensor rounded to bf16."""
    def bf(v):
        return np.asarray(v, np.float32).astype(BF16).astype(np.float32)
    x, w, b = (bf(values[k]) for k in ("x", "w", "b"))
    z = bf(bf(w @ x) + b[:, None])
    a = bf(gelu(z))
    dz = bf(0.5 * (1 + erf(z / np.sqrt(2))) + z * np.exp(-z * z / 2) / np.sqrt(2 * np.pi))
    return {"a": a, "loss": a.sum(), "dw": dz @ x.T, "db": dz.sum(axis=1)}


def run_layer(dtype, comm, preset, values):
    """Compile and execute once; {output: fp32 array}, and the compiled graph."""
    g, dw, db = layer_graph(dtype)
    cg = nt.compile(g, comm=comm, tiling=nt.TilingStrategy.manual(TILING), distribution=preset)
    numpy_dtype = storage_dtype(dtype)
    for name, value in values.items():
        cg.bind_data(name, np.asarray(value, np.float32).astype(numpy_dtype))
    cg.execute()
    cg.wait()
    names = {"a": "a", "loss": "loss", "dw": dw, "db": db}
    return {key: np.asarray(cg.get_output(name), np.float32) for key, name in names.items()}, cg


def differences(got, want):
    """Output names whose values are off by more than a few bf16 roundings of the scale."""
    bad = []
    for name in OUTPUTS:
        scale = float(np.abs(want[name]).max())
        if not np.allclose(got[name], want[name], rtol=2e-2, atol=2e-2 * scale):
            bad.append(f"{name}: max |diff| {np.abs(got[name] - want[name]).max():.3g}, "
                       f"scale {scale:.3g}")
    return bad
