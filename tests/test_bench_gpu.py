"""benchmarks/bench_gpu.py before it meets a GPU: without CuPy or a GPU it says why and
exits 2; its gemm rows run on the CPU through the stand-in device (tests/stand_in_device.py,
with the stand-in's array module as `cupy`) and give a right row; the GPT-2 rows do too
on a small shape with torch on the CPU (slow: transformers). Plain pytest."""

import importlib.util
import sys
from pathlib import Path

import pytest
from cuda_support import cuda_unavailable_reason
from stand_in_device import StandInCupy, stand_in_device

pytestmark = pytest.mark.mpi_skip
SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gpu.py"


@pytest.fixture
def bench(monkeypatch):
    """The script as a module, its rows on the stand-in device and `cupy` the stand-in's."""
    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "DEVICE", stand_in_device())
    monkeypatch.setattr(module, "TORCH_DEVICE", "cpu")
    monkeypatch.setitem(sys.modules, "cupy", StandInCupy())
    return module


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a GPU is usable here")
def test_without_a_gpu_it_says_why_and_exits_2(capsys):
    spec = importlib.util.spec_from_file_location("bench_gpu_plain", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"bench_gpu: cannot run: {cuda_unavailable_reason()}\n"
    assert captured.out == ""


def test_the_gemm_rows_are_right_on_the_stand_in(bench):
    args = bench.parse_args(["--n", "64", "--steps", "2", "--warmup", "0"])
    for name, tasks in (("gemm-2048", 4 ** 3), ("gemm-1024", 8 ** 3)):
        row = bench.ROWS[name](args)
        assert "error" not in row, row
        assert row["tasks"] == tasks and row["tile"] == 64 // round(tasks ** (1 / 3))
        assert row["max_rel_error"] < 1e-5 and row["ratio"] > 0
        assert row["ours"]["best_ms"] <= row["ours"]["median_ms"]


@pytest.mark.slow
def test_the_gpt2_rows_run_on_the_stand_in(bench, monkeypatch):
    pytest.importorskip("transformers")
    monkeypatch.setattr(bench, "GPT2_124M", dict(vocab_size=64, n_positions=16, n_embd=32,
                                                 n_layer=1, n_head=2))
    args = bench.parse_args(["--batch", "2", "--seq", "8", "--steps", "1", "--warmup", "0"])
    for mixed in (False, True):
        row = bench.gpt2_row(args, mixed)
        assert "error" not in row, row
        assert row["ratio"] > 0 and row["first_over_later"] > 0
        assert row["tiling"].startswith("auto target")   # the stand-in plans as a CPU
