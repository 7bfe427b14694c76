"""compare_strategies.py --torch: the same GPT-2 (transformers' GPT2LMHeadModel with our
initial weights), batches, AdamW and learning-rate schedule under PyTorch DDP and
FSDP2 (`torch.distributed.fsdp.fully_shard` per block and on the root) on the ranks of
the job: torch.distributed set up from the MPI rank and size with a TCP store on
127.0.0.1, gloo on CPU (NCCL where each rank has a GPU).

What is measured on the torch side: model state per rank (the local shards of the
parameters, their gradients and AdamW's two moments, from the tensors themselves),
step time (the slowest rank, median of the steps after the first), the loss (mean over
ranks of each rank's mean over its sequences), and bytes sent per rank per step from
the collectives torch.profiler records in the last step: their sizes times the ring
algorithm's share, (N-1)/N for an all-gather, 2(N-1)/N for an all-reduce. gloo has no
reduce-scatter: FSDP2's reduce-scatter of gradients runs as an all-reduce there.
PyTorch's CPU allocator keeps no peak, so there is no torch peak memory on CPU.

Needs torch and transformers (the hf extra: pip install -e '.[hf]'). Run as a script it
is compare_strategies.py --model gpt2 --torch, with that script's other options.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import sys
import time

import numpy as np

from nntile_spmd.models import gpt2

DEFAULT_PORT = 29517
SHARE = {"all_gather": lambda n: (n - 1) / n, "all_reduce": lambda n: 2 * (n - 1) / n,
         "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: (n - 1) / n}


def require_torch():
    """Refuse before any training where torch or transformers is not installed."""
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(f"--torch needs {' and '.join(missing)}, not installed here: "
                         "install the hf extra (pip install -e '.[hf]')")


def init_torch_distributed(rank, size):
    """torch.distributed on the MPI ranks: a TCP store on 127.0.0.1 (port
    $NNTILE_TORCH_PORT or DEFAULT_PORT), NCCL where CUDA is there, else gloo."""
    import torch
    import torch.distributed as dist
    if dist.is_initialized():
        return dist
    port = int(os.environ.get("NNTILE_TORCH_PORT", DEFAULT_PORT))
    store = dist.TCPStore("127.0.0.1", port, size, rank == 0)
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(backend, store=store, rank=rank, world_size=size)
    return dist


def hf_model(config, state):
    """transformers' GPT-2 in fp64 holding `state` (HF names and shapes)."""
    import torch
    import transformers
    hf_config = transformers.GPT2Config(**(config.to_hf_dict() | {
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "bos_token_id": 0,
        "eos_token_id": 0}))
    model = transformers.GPT2LMHeadModel(hf_config).double()
    model.load_state_dict({name: torch.from_numpy(np.ascontiguousarray(value))
                           for name, value in state.items()}, strict=False)
    return model.to("cuda") if torch.cuda.is_available() else model


def wrap(kind, model, dist):
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model)
    from torch.distributed.fsdp import fully_shard
    for block in model.transformer.h:
        fully_shard(block)
    return fully_shard(model)


def local_bytes(tensor) -> int:
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def model_state_bytes(model, optimizer) -> int:
    """This rank's bytes of parameters, gradients and optimizer state."""
    total = 0
    for param in model.parameters():
        total += local_bytes(param) + (local_bytes(param.grad) if param.grad is not None else 0)
        total += sum(local_bytes(v) for v in optimizer.state[param].values()
                     if hasattr(v, "numel") and v.dim() > 0)
    return total


def sent_bytes(profile, nranks, element_size) -> float:
    """Bytes this rank sends in the profiled step's collectives (ring share)."""
    total = 0.0
    for event in profile.events():
        if not event.name.startswith("gloo:") and not event.name.startswith("nccl:"):
            continue
        kind = event.name.split(":", 1)[1]
        if kind in SHARE and event.input_shapes and event.input_shapes[0]:
            total += SHARE[kind](nranks) * int(np.prod(event.input_shapes[0])) * element_size
    return total


def run_torch(kind, config, state, batches, schedule, weight_decay, comm):
    """{preset, model_state, sent, step_ms, losses} of `kind` ("ddp" or "fsdp2")."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    dist = init_torch_distributed(comm.rank, comm.size)
    model = wrap(kind, hf_model(config, state), dist)
    optimizer = torch.optim.AdamW(model.parameters(), lr=schedule(0),
                                  weight_decay=weight_decay)
    device = next(model.parameters()).device
    losses, times, sent = [], [], 0.0
    for step, (ids, targets) in enumerate(batches):
        for group in optimizer.param_groups:
            group["lr"] = schedule(step)
        mine = np.array_split(np.arange(ids.shape[1]), comm.size)[comm.rank]   # [T, B]
        ids_here = torch.from_numpy(np.ascontiguousarray(ids[:, mine].T)).to(device)
        targets_here = torch.from_numpy(np.ascontiguousarray(targets[:, mine].T)).to(device)
        last = step == len(batches) - 1
        dist.barrier()
        start = time.perf_counter()
        recorder = profile(activities=[ProfilerActivity.CPU], record_shapes=True) if last \
            else contextlib.nullcontext()
        with recorder as recorded:
            logits = model(input_ids=ids_here).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     targets_here.reshape(-1))
            loss.backward()
            optimizer.step()
        seconds = time.perf_counter() - start
        times.append(max(comm.allgather(seconds)))
        losses.append(float(np.mean(comm.allgather(loss.item()))))
        if last:
            sent = sent_bytes(recorded, comm.size, 8)
            state_bytes = model_state_bytes(model, optimizer)
        optimizer.zero_grad()
    return {"preset": f"torch {kind}", "model_state": comm.allgather(state_bytes),
            "sent": comm.allgather(sent), "step_ms": statistics.median(times[1:]) * 1e3,
            "losses": losses}


def initial_state(model, params) -> dict:
    """HF state dict of our initial parameters (one-rank compile of the same model)."""
    import nntile_spmd as nt
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1))
    for name, value in params.items():
        cg.bind_data(name, value)
    return model.hf_state_dict(cg)


def print_side_by_side(ours, theirs, nranks):
    print(f"\nSide by side on the same {nranks} rank(s), same model, initial weights, "
          "batches, AdamW and schedule (KiB; ours: planned = measured; torch: model state "
          "from its tensors, bytes from the profiled collectives x ring share)")
    header = (f"{'run':<11} {'model state/rank':>17} {'peak/rank':>10} "
              f"{'sent/rank/step':>15} {'ms/step':>8} {'first loss':>11} {'final loss':>13}")
    print(header)
    for r in ours:
        print(f"{'ours ' + r['preset']:<11} {max(r['model_state']) / 1024:>17.1f} "
              f"{max(r['planned_peak']) / 1024:>10.1f} "
              f"{r['measured_sent'] / nranks / 1024:>15.1f} {r['step_ms']:>8.2f} "
              f"{r['losses'][0]:>11.6f} {r['losses'][-1]:>13.10f}")
    for r in theirs:
        print(f"{r['preset']:<11} {max(r['model_state']) / 1024:>17.1f} {'n/a':>10} "
              f"{max(r['sent']) / 1024:>15.1f} {r['step_ms']:>8.2f} "
              f"{r['losses'][0]:>11.6f} {r['losses'][-1]:>13.10f}")


def gpt2_config(args, vocab):
    layers, embd, heads, seq = (int(v) for v in args.gpt2.split(","))
    return gpt2.GPT2Config(vocab_size=vocab, n_positions=seq, n_embd=embd, n_layer=layers,
                           n_head=heads)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="mpiexec -n N python examples/torch_side.py [compare_strategies.py options]",
        epilog="compare_strategies.py --help lists the options (--steps, --batch, --gpt2 ...)")
    _, options = parser.parse_known_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import compare_strategies
    compare_strategies.main(["--model", "gpt2", "--torch", *options])


if __name__ == "__main__":
    main()
