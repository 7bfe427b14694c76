"""Train a byte-level GPT-2 (or Llama) on the Python standard library's own sources, any preset.

    mpiexec -n 2 python examples/train_gpt2.py --strategy fsdp
    python examples/train_gpt2.py --strategy tp --simulate 2     # 2 ranks in one process
    mpiexec -n 2 python examples/train_gpt2.py --model llama --n-kv-head 2

--precision bf16-mixed (GPT-2) keeps fp32 master weights, gradients and AdamW state
and runs the forward and backward in bf16 (docs/precision.md); the summary then also
holds the whole train loss curve ("train_losses").

--model llama trains a Llama of the same width and depth instead (RMSNorm, rotary
positions, SwiGLU MLP of --intermediate units, grouped-query attention with
--n-kv-head key/value heads, untied output layer) on the same corpus and schedule.

The corpus (examples/gpt2_corpus.py) is this Python's stdlib .py files, split into
train and held-out FILES by a hash of their path. Every rank builds the same
graph and binds the same full batch (a pure function of seed and step); the
preset decides which tiles each rank computes. AdamW with a cosine learning
rate and linear warm-up, set through the runtime scalar "lr" (never recompiled).
Rank 0 shows a tqdm bar, writes a JSON-lines log (--log), prints the held-out
loss every --eval-every steps, then the held-out loss of an add-one-smoothed
bigram model on the same positions (nats, like ours), and --sample N bytes
generated from --prompt. The last stdout line is one JSON object: strategy,
ranks, params, tokens_per_s, final_train_loss, heldout_loss,
bigram_heldout_loss, peak_bytes_per_rank and bytes_sent_per_step (both
measured by the runtime in the last training step, not planned). A run of at least
CHECK_MIN_STEPS steps (the default 500 is one) fails (exit code 1) unless the held-out
loss beats the bigram's; a shorter run only reports both (--check forces the check,
--no-check skips it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpt2_corpus as corpus  # noqa: E402

import nntile_spmd as nt  # noqa: E402
from nntile_spmd.models import gpt2, llama  # noqa: E402
from nntile_spmd.train import CosineSchedule, Trainer  # noqa: E402
from nntile_spmd.train.cli import DefaultsHelpFormatter, add_device_arg  # noqa: E402

STRATEGIES = ("single", "ddp", "fsdp", "tp")
CHECK_MIN_STEPS = 500   # the default run (it beats the bigram in about a minute); 20 steps cannot


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--strategy", choices=STRATEGIES, default="fsdp")
    parser.add_argument("--model", choices=("gpt2", "llama"), default="gpt2")
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-embd", type=int, default=128)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-kv-head", type=int, default=0,
                        help="llama: key/value heads (default: half of --n-head)")
    parser.add_argument("--intermediate", type=int, default=0,
                        help="llama: SwiGLU units (default: 8/3 n_embd, a multiple of 8)")
    parser.add_argument("--seq", type=int, default=64, help="context length T")
    parser.add_argument("--batch", type=int, default=16, help="sequences per step")
    parser.add_argument("--steps", type=int, default=500, help="optimizer steps")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument("--warmup", type=int, default=50, help="linear warm-up steps")
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--dtype", choices=("fp32", "fp64"), default="fp32")
    parser.add_argument("--precision", choices=("plain", "bf16-mixed"), default="plain",
                        help="bf16-mixed: --dtype master weights, bf16 forward/backward")
    parser.add_argument("--eval-every", type=int, default=100,
                        help="held-out loss every N steps (and at the end)")
    parser.add_argument("--eval-batches", type=int, default=8,
                        help="fixed held-out batches per evaluation")
    parser.add_argument("--corpus-bytes", type=int, default=2_000_000,
                        help="train bytes read (held-out: a tenth)")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="generate N bytes from --prompt after training")
    parser.add_argument("--prompt", default="def ")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dropout", type=float, default=0.0, metavar="P",
                        help="dropout probability in training steps (gpt2: embeddings, "
                             "attention, residual; llama: attention)")
    parser.add_argument("--simulate", type=int, default=0, metavar="N",
                        help="run N simulated ranks in this process instead of MPI")
    add_device_arg(parser)
    parser.add_argument("--log", default=None, help="JSON-lines log (rank 0)")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm bar")
    checks = parser.add_mutually_exclusive_group()
    checks.add_argument("--check", action="store_true",
                        help="fail unless the bigram baseline is beaten, however short the "
                             f"run (without it, runs of >= {CHECK_MIN_STEPS} steps are checked)")
    checks.add_argument("--no-check", action="store_true",
                        help="never fail on the bigram baseline")
    return parser.parse_args(argv)


def checks_baseline(args) -> bool:
    """Whether this run must beat the bigram baseline: a short run (a smoke test, a
    try of the options) has not trained long enough to, so it only reports."""
    return args.check or (not args.no_check and args.steps >= CHECK_MIN_STEPS)


def build_model(args):
    """The GPT-2 or Llama graph of the command line's sizes."""
    if args.model == "gpt2":
        config = gpt2.GPT2Config(vocab_size=corpus.VOCAB, n_positions=args.seq,
                                 n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_head,
                                 embd_pdrop=args.dropout, attn_pdrop=args.dropout,
                                 resid_pdrop=args.dropout)
        compute = "bf16" if args.precision == "bf16-mixed" else None
        return gpt2.build_gpt2(config, batch=args.batch, seq=args.seq, dtype=args.dtype,
                               compute_dtype=compute, dropout=args.dropout > 0)
    if args.precision != "plain":
        raise SystemExit("--precision bf16-mixed is built for --model gpt2 only")
    config = llama.LlamaConfig(
        vocab_size=corpus.VOCAB, hidden_size=args.n_embd, num_hidden_layers=args.n_layer,
        num_attention_heads=args.n_head,
        num_key_value_heads=args.n_kv_head or max(1, args.n_head // 2),
        intermediate_size=args.intermediate or -(-8 * args.n_embd // 3 // 8) * 8,
        max_position_embeddings=args.seq, attention_dropout=args.dropout)
    return llama.build_llama(config, batch=args.batch, seq=args.seq, dtype=args.dtype,
                             dropout=args.dropout > 0)


def make_trainer(args, comm):
    """The model + AdamW + cosine schedule, compiled for `args.strategy` on `comm`."""
    model = build_model(args)
    schedule = CosineSchedule(args.lr, total=args.steps, warmup=min(args.warmup, args.steps),
                              min_lr=args.lr / 10)
    trainer = Trainer(model, "adamw", comm=comm, distribution=args.strategy, seed=args.seed,
                      log_path=args.log, progress=False, lr_schedule=schedule, lr=args.lr,
                      weight_decay=args.weight_decay)
    values = model.init_params(np.random.default_rng(args.seed))
    trainer.bind_params(values)
    for name in model.constants:          # positions and the causal mask
        trainer.cg.bind_data(name, values[name])
    return trainer


def forward_loss(cg, ids, targets) -> float:
    """Mean loss of one batch by the forward phase alone (weights untouched)."""
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", targets)
    cg.execute(phases="forward")
    return float(cg.get_output("loss"))


def heldout_loss(cg, batches) -> float:
    # every batch has the same number of positions, so the mean of means is the mean
    return float(np.mean([forward_loss(cg, ids, targets) for ids, targets in batches]))


def measured(trainer) -> dict:
    """This step's measured peak bytes per rank and bytes sent by all ranks."""
    world, cg = trainer.world, trainer.cg
    local = {rank: cg.get_stats(rank) for rank in world.local_ranks()}
    if len(local) == world.size:
        stats = [local[rank] for rank in range(world.size)]
    else:
        stats = world.agree(local[world.rank])
    return {"peak_bytes_per_rank": [s.peak_bytes for s in stats],
            "bytes_sent_per_step": sum(s.bytes_transferred for s in stats)}


def train(args, trainer, data, heldout) -> dict:
    """The training loop with periodic held-out loss; returns what the summary needs."""
    rank0 = trainer.rank == 0
    bar = tqdm(total=args.steps, desc=f"gpt2[{args.strategy}]", leave=False,
               disable=args.no_progress or not rank0)
    evaluations, last_stats = [], None
    for step in range(args.steps):
        ids, targets = corpus.train_batch(data, args.seed, step, args.seq, args.batch)
        loss = trainer.train_step([{"input_ids": ids, "targets": targets}])
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.3f}")
        if step == args.steps - 1:
            last_stats = measured(trainer)       # before an evaluation overwrites the stats
        if (step + 1) % args.eval_every == 0 or step == args.steps - 1:
            evaluations.append({"step": step + 1, "heldout_loss": heldout_loss(trainer.cg,
                                                                               heldout)})
            log_line(trainer, evaluations[-1])
            if rank0:   # flushed while the bar is cleared: tqdm.write does not flush,
                # and in a pipe (mpiexec's) the line came out later, glued to the bar
                with tqdm.external_write_mode():
                    print(f"step {step + 1}: train loss {loss:.4f}, held-out loss "
                          f"{evaluations[-1]['heldout_loss']:.4f}", flush=True)
    bar.close()
    return {"evaluations": evaluations, **last_stats}


def log_line(trainer, entry):
    if trainer.log_file is not None:
        trainer.log_file.write(json.dumps(entry) + "\n")
        trainer.log_file.flush()


def sample(trainer, args, prompt: bytes, count: int) -> bytes:
    """`count` bytes continuing `prompt`, from the model's key/value-cache Generator on the
    trained weights (one token's work per byte, the same draws on every rank). The model
    has `seq` positions: when they are full, generation goes on from the last seq / 2
    bytes (a new prefill). Temperature 0 is greedy."""
    model = trainer.model
    family = gpt2 if args.model == "gpt2" else llama
    generator = family.Generator(model.config, model.hf_state_dict(trainer.cg), batch=1,
                                 max_length=model.seq, dtype=model.dtype,
                                 comm=nt.SimulatedWorld(args.simulate) if args.simulate
                                 else None)
    keep = max(1, model.seq // 2)
    text, generated = list(prompt[-keep:]) or [ord("\n")], []
    while len(generated) < count:
        if len(text) >= model.seq:
            text = text[-keep:]
        new = min(count - len(generated), model.seq - len(text))
        ids = generator.generate(np.asarray(text)[:, None], new,
                                 do_sample=args.temperature > 0,
                                 temperature=max(args.temperature, 1e-6),
                                 seed=args.seed + len(generated))
        tokens = [int(token) for token in ids[len(text):, 0]]
        text, generated = text + tokens, generated + tokens
    return bytes(prompt) + bytes(generated)


def run(args) -> dict:
    comm = nt.SimulatedWorld(args.simulate) if args.simulate else None
    text = corpus.load_corpus(args.corpus_bytes)
    heldout = corpus.heldout_batches(text.heldout, args.seq, args.batch, args.eval_batches)
    bigram = corpus.bigram_loss(corpus.bigram_log_probs(text.train), heldout)
    trainer = make_trainer(args, comm)
    result = train(args, trainer, text.train, heldout)
    generated = (sample(trainer, args, args.prompt.encode(), args.sample)
                 if args.sample else b"")
    trainer.close()
    times = [entry["step_time_ms"] for entry in trainer.history[1:]] or \
        [trainer.history[0]["step_time_ms"]]
    return {"model": args.model, "strategy": args.strategy, "ranks": trainer.world.size,
            "params": trainer.model.graph.num_parameters(),
            "tokens_per_s": round(args.seq * args.batch * 1e3 / statistics.median(times), 1),
            "final_train_loss": trainer.history[-1]["loss"],
            "heldout_loss": result["evaluations"][-1]["heldout_loss"],
            "bigram_heldout_loss": bigram,
            "peak_bytes_per_rank": result["peak_bytes_per_rank"],
            "bytes_sent_per_step": result["bytes_sent_per_step"],
            "first_train_loss": trainer.history[0]["loss"], "steps": args.steps,
            "precision": args.precision,
            **({"train_losses": [entry["loss"] for entry in trainer.history]}
               if args.precision != "plain" else {}),
            "corpus": {"train_bytes": len(text.train), "heldout_bytes": len(text.heldout),
                       "train_files": text.train_files, "heldout_files": text.heldout_files},
            "sample": generated.decode("utf-8", errors="replace"), "rank": trainer.rank}


def main(argv=None):
    args = parse_args(argv)
    summary = run(args)
    generated = summary.pop("sample")
    if summary.pop("rank") == 0:
        print(f"{args.strategy} on {summary['ranks']} rank(s), {summary['params']} parameters: "
              f"train loss {summary['first_train_loss']:.4f} -> "
              f"{summary['final_train_loss']:.4f} in {args.steps} steps, "
              f"{summary['tokens_per_s']:.0f} tokens/s")
        print(f"held-out loss {summary['heldout_loss']:.4f} nats/byte; bigram baseline "
              f"{summary['bigram_heldout_loss']:.4f}")
        if not checks_baseline(args) and not args.no_check:
            print(f"(not checked against the baseline: runs of >= {CHECK_MIN_STEPS} steps "
                  "are; --check forces it)")
        if generated:
            print(f"--- sample ({args.sample} bytes after {args.prompt!r}) ---\n{generated}\n---")
        print(json.dumps(summary), flush=True)
    if checks_baseline(args) and summary["heldout_loss"] >= summary["bigram_heldout_loss"]:
        raise SystemExit(f"FAILED: held-out loss {summary['heldout_loss']:.4f} does not beat "
                         f"the bigram baseline {summary['bigram_heldout_loss']:.4f} "
                         f"({args.strategy}, {summary['ranks']} ranks)")


if __name__ == "__main__":
    main()
