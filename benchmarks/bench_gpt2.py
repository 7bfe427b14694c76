"""GPT-2 train-step time: ours vs transformers' GPT2LMHeadModel, same shapes, one run.

A train step is forward + backward + AdamW on one batch of B sequences of T bytes
(vocab 256): for ours, binding the batch, cg.execute() (all phases) and reading the
loss; for transformers, zero_grad, model(input_ids, labels=ids), loss.backward()
and torch.optim.AdamW.step(). Both start from the same weights (ours loads HF's
state dict), take the same batches, run fp32 with the same number of threads
(ours: nt.compile(threads=N) limits BLAS and numba; torch.set_num_threads(N)),
one rank, no dropout. After --warmup untimed steps, the two are timed in
alternation (--steps each) so that a busy neighbour slows both alike; the table
shows the median and best ms/step and ours/theirs (> 1: ours is slower). The
first step's losses are printed side by side: they must agree (same computation).

Default shape: (6 layers, n_embd 384, 6 heads, batch 8, seq 256), ~10 s
per step of ours on this 2-core machine. Commands (from the repository root):

    PYTHONPATH=. python benchmarks/bench_gpt2.py
    PYTHONPATH=. python benchmarks/bench_gpt2.py --n-layer 2 --n-embd 128 --n-head 4 --seq 64
    PYTHONPATH=. python benchmarks/bench_gpt2.py --threads 1 --profile   # + time per op type

--attention-mask tensor runs ours with the bool-constant mask (every attention block
computed) instead of the structural causal one (blocks above the diagonal skipped).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.train import add_optimizer

from _common import CpuLoad, wait_for_quiet


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-layer", type=int, default=6)
    parser.add_argument("--n-embd", type=int, default=384)
    parser.add_argument("--n-head", type=int, default=6)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--steps", type=int, default=3, help="timed steps of each")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps of each")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--task-threads", type=int, default=None,
                        help="ours: tile tasks side by side (default: automatic, "
                             "runtime/thread_budget.py; 1: serial executor with BLAS on "
                             "--threads)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--attention-mask", choices=("causal", "tensor"), default="causal",
                        help="ours: the structural causal mask or the bool constant")
    parser.add_argument("--profile", action="store_true",
                        help="then profile one step of ours: kernel time per op type, "
                             "and the attention's share (ops on its [T, T] tensors)")
    parser.add_argument("--no-wait", action="store_true",
                        help="do not wait for the machine to be idle first")
    return parser.parse_args(argv)


def make_hf(args):
    import torch
    import transformers
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=args.vocab, n_positions=args.seq,
                                     n_embd=args.n_embd, n_layer=args.n_layer,
                                     n_head=args.n_head, resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).float().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    return model, optimizer


def make_ours(args, state_dict):
    config = gpt2.GPT2Config(vocab_size=args.vocab, n_positions=args.seq,
                             n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_head)
    model = gpt2.build_gpt2(config, batch=args.batch, seq=args.seq, dtype="fp32",
                            attention_mask=args.attention_mask)
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=args.lr,
                  weight_decay=0.01)
    cg = nt.compile(model.graph, threads=args.threads, task_threads=args.task_threads)
    model.load_hf_state_dict(cg, state_dict)
    return cg


def hf_step(hf, ids):
    """One HF train step on ids (B, T); returns (seconds, loss, CPU seconds)."""
    import torch
    model, optimizer = hf
    cpu, start = time.process_time(), time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    batch = torch.from_numpy(ids)
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    optimizer.step()
    return time.perf_counter() - start, loss.item(), time.process_time() - cpu


def our_step(cg, ids):
    """One train step of ours on the same ids (B, T): ids and next-byte targets [T, B];
    returns (seconds, loss, CPU seconds)."""
    targets = np.full(ids.T.shape, -100, dtype=np.int64)
    targets[:-1] = ids.T[1:]                   # HF shifts labels=ids the same way
    cpu, start = time.process_time(), time.perf_counter()
    cg.bind_data("input_ids", np.asfortranarray(ids.T))
    cg.bind_data("targets", np.asfortranarray(targets))
    cg.execute()
    loss = float(cg.get_output("loss"))
    return time.perf_counter() - start, loss, time.process_time() - cpu


def main(argv=None):
    args = parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    hf = make_hf(args)
    cg = make_ours(args, hf[0].state_dict())   # same initial weights
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, args.vocab, (args.batch, args.seq))
               for _ in range(args.warmup + args.steps)]
    first = (our_step(cg, batches[0])[1], hf_step(hf, batches[0])[1])
    for ids in batches[1:args.warmup]:
        our_step(cg, ids)
        hf_step(hf, ids)
    if not args.no_wait:
        print(f"machine busy before start: {wait_for_quiet():.0%} of all cores")
    ours, theirs = [], []
    with CpuLoad() as load:
        for ids in batches[args.warmup:]:     # alternate: the same noise for both
            ours.append(our_step(cg, ids))
            theirs.append(hf_step(hf, ids))
    print_result(args, ours, theirs, first, load, cg.task_threads)
    if args.profile:
        print_profile(cg, args.seq)


def print_profile(cg, seq):
    """One more step of ours under the profiler: time per op type, then per op type the
    part spent on the attention's [T, T] tensors (scores, probabilities, gradients)."""
    profile = cg.profile("bench_gpt2_trace.json")
    print(profile.summary())
    attention = {}
    for event in profile.trace["traceEvents"]:
        if event.get("cat") != "task":
            continue
        op = cg.ops_by_name.get(event["args"]["op"])
        if op is not None and any(t.shape[:2] == (seq, seq) and t.ndim == 4
                                  for t in op.inputs + op.outputs):   # [Tk, Tq, B, H]
            attention[event["name"]] = attention.get(event["name"], 0.0) + event["dur"] / 1e3
    total = sum(row["kernel_ms"] for row in profile.op_types.values())
    print(f"attention's [T, T] tensors: {sum(attention.values()):.1f} of {total:.1f} kernel "
          "ms: " + ", ".join(f"{name} {ms:.1f}" for name, ms in
                            sorted(attention.items(), key=lambda kv: -kv[1])))


def print_result(args, ours, theirs, first, load, task_threads):
    print(f"GPT-2 train step (forward+backward+AdamW), fp32, {args.threads} thread(s) "
          f"(ours: {task_threads} task thread(s) in the last step"
          f"{'' if args.task_threads else ', chosen automatically'}): "
          f"vocab {args.vocab}, {args.n_layer} layers, n_embd {args.n_embd}, "
          f"{args.n_head} heads, batch {args.batch}, seq {args.seq}; "
          f"{args.steps} timed steps each after {args.warmup} warm-up")
    print(f"first-step loss: ours {first[0]:.6f}, transformers {first[1]:.6f}")
    print(f"{'':14s} {'median ms/step':>15s} {'best ms/step':>13s} {'median CPU ms':>14s} "
          f"{'best CPU ms':>12s}")
    for label, steps in (("ours", ours), ("transformers", theirs)):
        wall, cpu = [step[0] for step in steps], [step[2] for step in steps]
        print(f"{label:14s} {statistics.median(wall) * 1e3:15.1f} {min(wall) * 1e3:13.1f} "
              f"{statistics.median(cpu) * 1e3:14.1f} {min(cpu) * 1e3:12.1f}")
    for what, index in (("wall", 0), ("CPU", 2)):
        mine, other = [step[index] for step in ours], [step[index] for step in theirs]
        print(f"ratio ours/transformers ({what}): median "
              f"{statistics.median(mine) / statistics.median(other):.2f}, "
              f"best {min(mine) / min(other):.2f}")
    print(f"other processes during the runs: {load.others():.0%} of all cores")


if __name__ == "__main__":
    main()
