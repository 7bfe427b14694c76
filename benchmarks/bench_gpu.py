"""One GPU: nntile_spmd vs PyTorch / CuPy side by side in one process, one JSON line a row.

Rows (--rows picks some; default all), each timed in alternation with its reference
after warm-up, best and median of --steps:

  gpt2-124m-fp32  GPT-2 124M shape (V 50257, 12 x 768, 12 heads), batch 4, seq 512,
                  fp32 train step with AdamW: ours (nt.compile(device="cuda"), the
                  default tiling for a GPU) vs transformers' GPT2LMHeadModel eager
                  (no torch.compile), same initial weights, same batches; ours' first
                  step (planning done, kernels compiled on first use) is reported too
  gpt2-124m-bf16  the same with bf16 mixed precision: ours build_gpt2(compute_dtype=
                  "bf16") vs transformers under torch.autocast("cuda", torch.bfloat16)
  gemm-2048       C = A @ B, 8192^3 fp32, all three matrices in 2048^2 tiles (64 tasks)
                  on one rank vs one cupy.matmul of the whole arrays (--n sets the
                  size; the tiles are n / 4)
  gemm-1024       the same in 1024^2 tiles (n / 8: 512 tasks)

A step of ours is bind the batch + execute() (which ends with a device sync) + read
the loss; of transformers zero_grad + forward + backward + AdamW.step() + loss.item().
A gemm of ours is execute(); of CuPy matmul + a stream sync. Every line names the GPU;
a GPT-2 line also gives the simulator's step on the h100 profile (plan/device_profile.py),
to calibrate that profile against.
Checks: the first step's losses agree within 1e-3 relative (2e-2 for bf16); the tiled
C equals CuPy's within 1e-3 relative (max abs error over max abs value). A failed
check or row prints its line with "error" and the exit status is 1.

Where CuPy or a GPU is missing it says why on stderr and exits 2 without a row.
Command (the GPU machine, from the repository root; docs/gpu.md):

    source .dev/device-env.sh && python3 benchmarks/bench_gpu.py
    python3 benchmarks/bench_gpu.py --rows gemm-2048 gemm-1024 --steps 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path

import numpy as np

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.plan.instructions import Exec
from nntile_spmd.plan.segments import segment_summary
from nntile_spmd.simulate import MachineModel, predict
from nntile_spmd.train import add_optimizer

GPT2_124M = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
# where ours and torch run; tests/test_bench_gpu.py runs the rows on the CPU through
# the stand-in device to check this script before it meets a GPU
DEVICE, TORCH_DEVICE = "cuda", "cuda"
LOSS_TOLERANCE = {"fp32": 1e-3, "bf16": 2e-2}
GEMM_TOLERANCE = 1e-3


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=list(ROWS))
    parser.add_argument("--steps", type=int, default=3, help="timed steps of each")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps after the first")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--n", type=int, default=8192, help="gemm size")
    return parser.parse_args(argv)


def cuda_unavailable_reason():
    """tests/cuda_support.py's answer (the one place that asks CuPy whether a GPU is
    usable), loaded by path: tests/ on sys.path would shadow packages such as `kernels`."""
    spec = spec_from_file_location(
        "cuda_support", Path(__file__).resolve().parents[1] / "tests" / "cuda_support.py")
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.cuda_unavailable_reason()


def timing(seconds) -> dict:
    return {"best_ms": round(min(seconds) * 1e3, 3),
            "median_ms": round(statistics.median(seconds) * 1e3, 3)}


def gpu_name() -> str:
    import cupy
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else name


def exec_count(cg) -> int:
    return sum(type(instruction) is Exec for instruction in cg.plan.program(0))


# -- GPT-2 ---------------------------------------------------------------------------
def make_hf(args, mixed):
    import torch
    import transformers
    torch.manual_seed(0)
    config = transformers.GPT2Config(**GPT2_124M, resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(config).float().train()
    state = {name: value.detach().cpu().numpy() for name, value in model.state_dict().items()}
    model = model.to(TORCH_DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    return (model, optimizer, mixed), state


def hf_step(hf, ids):
    """One transformers step on ids (B, T); (seconds, loss)."""
    import torch
    model, optimizer, mixed = hf
    start = time.perf_counter()
    batch = torch.from_numpy(ids).to(TORCH_DEVICE)
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(TORCH_DEVICE, dtype=torch.bfloat16, enabled=mixed):
        loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    optimizer.step()
    value = loss.item()                       # waits for the step's kernels
    return time.perf_counter() - start, value


def make_ours(args, state, mixed):
    config = gpt2.GPT2Config(**GPT2_124M)
    model = gpt2.build_gpt2(config, batch=args.batch, seq=args.seq, dtype="fp32",
                            compute_dtype="bf16" if mixed else None)
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-4,
                  weight_decay=0.01)
    start = time.perf_counter()
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1), device=DEVICE)
    compile_s = time.perf_counter() - start
    model.load_hf_state_dict(cg, state)
    return cg, compile_s


def our_step(cg, ids):
    """One step of ours on ids (B, T): ids and next-token targets [T, B]; (seconds, loss)."""
    targets = np.full(ids.T.shape, -100, dtype=np.int64)
    targets[:-1] = ids.T[1:]                  # transformers shifts labels=ids the same way
    start = time.perf_counter()
    cg.bind_data("input_ids", np.asfortranarray(ids.T))
    cg.bind_data("targets", np.asfortranarray(targets))
    cg.execute()
    loss = float(cg.get_output("loss"))
    return time.perf_counter() - start, loss


def gpt2_row(args, mixed):
    precision = "bf16" if mixed else "fp32"
    hf, state = make_hf(args, mixed)
    cg, compile_s = make_ours(args, state, mixed)
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, GPT2_124M["vocab_size"], (args.batch, args.seq))
               for _ in range(1 + args.warmup + args.steps)]
    our_first, our_loss = our_step(cg, batches[0])
    hf_first, hf_loss = hf_step(hf, batches[0])
    for ids in batches[1:1 + args.warmup]:
        our_step(cg, ids)
        hf_step(hf, ids)
    ours, theirs = [], []
    for ids in batches[1 + args.warmup:]:          # alternate: the same noise for both
        ours.append(our_step(cg, ids)[0])
        theirs.append(hf_step(hf, ids)[0])
    tokens = args.batch * args.seq
    row = {"batch": args.batch, "seq": args.seq,
           "tasks": exec_count(cg), "tiling": cg.plan.tiling_notes[0],
           "segments": segment_summary(cg.plan.program(0)),   # CUDA-graph replay units
           "ours": timing(ours), "ours_first_step_ms": round(our_first * 1e3, 1),
           "ours_compile_ms": round(compile_s * 1e3, 1),
           "torch": timing(theirs), "torch_first_step_ms": round(hf_first * 1e3, 1),
           "torch_attention": getattr(hf[0].config, "_attn_implementation", None),
           "ours_tokens_per_s": round(tokens / min(ours)),
           "torch_tokens_per_s": round(tokens / min(theirs)),
           "ratio": round(min(theirs) / min(ours), 4),   # >= 1: ours at least as fast
           "first_over_later": round(our_first / min(ours), 2),
           "first_loss": {"ours": our_loss, "torch": hf_loss},
           # the simulator's step on the h100 profile: what calibrating it must match
           "h100_profile_predicted_ms": round(
               predict(cg.plan, MachineModel.for_device("h100")).step_s * 1e3, 1)}
    if abs(our_loss - hf_loss) > LOSS_TOLERANCE[precision] * abs(hf_loss):
        row["error"] = f"first losses differ: ours {our_loss}, transformers {hf_loss}"
    return row


# -- tiled gemm ----------------------------------------------------------------------
def gemm_row(args, tile):
    import cupy
    n = args.n
    graph = nt.LogicalGraph("gemm")
    a = graph.tensor([n, n], "a", dtype="fp32", external=True)
    b = graph.tensor([n, n], "b", dtype="fp32", external=True)
    nt.ops.gemm(a, b, "c").mark_output()
    tiling = nt.TilingStrategy.manual({name: [tile, tile] for name in ("a", "b", "c")})
    cg = nt.compile(graph, comm=nt.SimulatedWorld(1), tiling=tiling, device=DEVICE)
    rng = np.random.default_rng(0)
    host_a = rng.standard_normal((n, n), dtype=np.float32)
    host_b = rng.standard_normal((n, n), dtype=np.float32)
    cg.bind_data("a", host_a)
    cg.bind_data("b", host_b)
    device_a, device_b = cupy.asarray(host_a), cupy.asarray(host_b)
    stream = cupy.cuda.get_current_stream()

    def ours():
        start = time.perf_counter()
        cg.execute()                            # ends with a device sync
        return time.perf_counter() - start

    def reference():
        start = time.perf_counter()
        product = cupy.matmul(device_a, device_b)
        stream.synchronize()
        return time.perf_counter() - start, product

    first = ours()
    reference()
    for _ in range(args.warmup):
        ours()
        reference()
    mine, theirs = [], []
    for _ in range(args.steps):
        mine.append(ours())
        theirs.append(reference()[0])
    expected = cupy.asnumpy(reference()[1])
    error = float(np.abs(cg.get_output("c") - expected).max() / np.abs(expected).max())
    flops = 2.0 * n ** 3
    row = {"n": n, "tile": tile, "tasks": exec_count(cg),
           "ours": timing(mine), "ours_first_ms": round(first * 1e3, 1),
           "cupy_matmul": timing(theirs),
           "ours_tflops": round(flops / min(mine) / 1e12, 2),
           "cupy_tflops": round(flops / min(theirs) / 1e12, 2),
           "ratio": round(min(theirs) / min(mine), 4), "max_rel_error": error}
    if error > GEMM_TOLERANCE:
        row["error"] = f"tiled C differs from cupy.matmul: {error:.3g} relative"
    return row


ROWS = {"gpt2-124m-fp32": lambda args: gpt2_row(args, mixed=False),
        "gpt2-124m-bf16": lambda args: gpt2_row(args, mixed=True),
        "gemm-2048": lambda args: gemm_row(args, args.n // 4),
        "gemm-1024": lambda args: gemm_row(args, args.n // 8)}


def main(argv=None) -> int:
    args = parse_args(argv)
    reason = cuda_unavailable_reason()
    if reason:
        print(f"bench_gpu: cannot run: {reason}", file=sys.stderr)
        return 2
    device, failed = gpu_name(), 0
    for name in args.rows:
        try:
            row = {"row": name, **ROWS[name](args)}
        except Exception as error:     # one broken row must not hide the others
            traceback.print_exc()
            row = {"row": name, "error": f"{type(error).__name__}: {error}"}
        row["device"] = device
        failed += "error" in row
        print(json.dumps(row), flush=True)
    print(f"bench_gpu: {len(args.rows)} rows, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
