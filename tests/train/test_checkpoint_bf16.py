"""bf16 tensors in checkpoints and safetensors files stay bf16 (safetensors' BF16):
saved under one preset and rank count, loaded under another, bit for bit."""

import ml_dtypes
import numpy as np
import pytest
from safetensors import safe_open

import nntile_spmd as nt
from nntile_spmd.train import (export_safetensors, import_safetensors, load_checkpoint,
                               save_checkpoint)

BF16 = np.dtype(ml_dtypes.bfloat16)


def bits(array):
    """The values' bit patterns (bf16 NaNs and signs compared exactly)."""
    return np.ascontiguousarray(array).view(np.uint8)


def compiled(ranks, preset, tile):
    g = nt.LogicalGraph("half_params")
    x = g.tensor([6, 4], "x", dtype="bf16", external=True)
    w = g.tensor([5, 6], "w", dtype="bf16", requires_grad=True, persistent=True)
    m = g.tensor([5, 6], "m", dtype="fp32", persistent=True)
    nt.ops.gemm(w, x, "y").mark_output()
    nt.ops.scale(m, "m2", 2.0).mark_output()
    return nt.compile(g, comm=nt.SimulatedWorld(ranks), distribution=preset,
                      tiling=nt.TilingStrategy.manual({"w": [tile, tile], "x": [tile, 2]}))


def values():
    rng = np.random.default_rng(4)
    return {"w": rng.standard_normal((5, 6)).astype(BF16),
            "m": rng.standard_normal((5, 6)).astype(np.float32),
            "x": rng.standard_normal((6, 4)).astype(BF16)}


@pytest.mark.parametrize("source, target", [((3, "fsdp", 2), (1, "single", 4)),
                                            ((1, "single", 3), (3, "tp", 2))])
def test_bf16_checkpoint_reloads_bit_for_bit(tmp_path, source, target):
    cg = compiled(*source)
    for name, value in values().items():
        cg.bind_data(name, value)
    save_checkpoint(cg, tmp_path, step=1)
    fresh = compiled(*target)
    load_checkpoint(fresh, tmp_path)
    for name in ("w", "m"):
        got = fresh.get_output(name)
        assert got.dtype == values()[name].dtype
        np.testing.assert_array_equal(bits(got), bits(values()[name]))


def test_bf16_safetensors_export_is_bf16(tmp_path):
    cg = compiled(3, "ddp", 2)
    for name, value in values().items():
        cg.bind_data(name, value)
    path = tmp_path / "weights.safetensors"
    export_safetensors(cg, path, names=["w", "m"])
    with safe_open(str(path), framework="numpy") as f:
        assert f.get_slice("w").get_dtype() == "BF16"
        assert f.get_slice("m").get_dtype() == "F32"
        np.testing.assert_array_equal(bits(f.get_tensor("w")), bits(values()["w"]))
    fresh = compiled(1, "single", 4)
    import_safetensors(fresh, path, names=["w", "m"], strict=False)
    np.testing.assert_array_equal(bits(fresh.get_output("w")), bits(values()["w"]))
