"""Compare single, DDP, FSDP, TP and meshes on the same model and data: memory, traffic,
time, loss.

    mpiexec -n 2 python examples/compare_strategies.py
    python examples/compare_strategies.py --simulate 3        # 3 ranks in one process
    mpiexec -n 2 python examples/compare_strategies.py --model gpt2
    python examples/compare_strategies.py --simulate 4       # adds dp2xtp2 and fsdp2xtp2
    mpiexec -n 2 python examples/compare_strategies.py --auto [--memory-budget BYTES]
    mpiexec -n 2 python examples/compare_strategies.py --model gpt2 --torch  # vs torch DDP/FSDP2

Trains the digits MLP of train_mlp.py (or, with --model gpt2, the byte-level GPT-2
of train_gpt2.py on its stdlib corpus) in fp64 under each preset on the current
world, prints planned vs measured peak memory per rank, bytes sent and received
and FLOPs per step (measured: buffers handed to MPI, the tile store's tracking
allocator, the executor's clock), the measured time per phase, final loss, next
to the ZeRO paper's formulas (and, for GPT-2, Megatron's per-layer tensor-parallel
traffic; on a world that splits into two axes of >= 2 ranks, the dp x tp and fsdp x tp
meshes with their traffic per mesh axis next to those formulas; pp on the whole world
and dp x pp where the model has a layer per stage, next to the stage-boundary
formula), with --plot PATH writes a PNG of the
loss curves and memory, and fails unless all loss curves agree to 1e-5 relative and
every measurement equals the plan.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_gpt2  # noqa: E402  (same models, data and trainer set-ups)
import torch_side  # noqa: E402  (the PyTorch DDP / FSDP2 side of --torch)
import train_mlp  # noqa: E402
from gpt2_corpus import train_batch  # noqa: E402
from mesh_formulas import label as mesh_label  # noqa: E402
from mesh_formulas import meshes_for, model_layers, print_mesh_comparison  # noqa: E402

import nntile_spmd as nt  # noqa: E402
from nntile_spmd.plan.instructions import Send  # noqa: E402
from nntile_spmd.runtime.compile_steps import make_world  # noqa: E402
from nntile_spmd.train.cli import DefaultsHelpFormatter, add_device_arg  # noqa: E402
from nntile_spmd.train import add_optimizer  # noqa: E402

PRESETS = ("single", "ddp", "fsdp", "tp")
MODEL_STATE_ROLES = ("parameter", "gradient", "state")
TOLERANCE = 1e-5


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--model", choices=("mlp", "gpt2"), default="mlp")
    parser.add_argument("--steps", type=int, default=None, help="default: mlp 60, gpt2 10")
    parser.add_argument("--batch", type=int, default=None, help="default: mlp 60, gpt2 8")
    parser.add_argument("--hidden", type=int, nargs="+", default=[128], help="mlp only")
    parser.add_argument("--gpt2", default="2,64,4,32", metavar="L,E,H,T",
                        help="gpt2 only: n_layer, n_embd, n_head, seq")
    parser.add_argument("--tile-bytes", type=int, default=16384)
    parser.add_argument("--simulate", type=int, default=0, metavar="N")
    parser.add_argument("--auto", action="store_true",
                        help="print nt.autoplan's ranked candidates for the model instead")
    parser.add_argument("--memory-budget", type=int, default=None, metavar="BYTES",
                        help="with --auto: bytes per rank every candidate must fit")
    parser.add_argument("--torch", action="store_true",
                        help="gpt2 under mpiexec: our ddp and fsdp beside PyTorch DDP and "
                             "FSDP2 on the same ranks (torch_side.py)")
    parser.add_argument("--machine", default=None, metavar="JSON",
                        help="with --auto: a machine file (default: a quick calibration)")
    add_device_arg(parser)
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="write the loss curves and memory to this PNG (rank 0); "
                             "none without it")
    args = parser.parse_args(argv)
    if args.torch:   # refused before any training, not after it
        if args.model != "gpt2" or args.simulate:
            parser.error("--torch compares GPT-2 on MPI ranks: --model gpt2, no --simulate")
        if args.plot:
            parser.error("--plot draws the presets' table, which --torch does not run "
                         "(it prints its side-by-side table only)")
        torch_side.require_torch()
    args.steps = args.steps or {"mlp": 60, "gpt2": 10}[args.model]
    args.batch = args.batch or {"mlp": 60, "gpt2": 8}[args.model]
    return args


def per_rank(world, local_values: dict) -> list:
    """[value of rank 0, rank 1, ...] from {rank: value} of the ranks this process runs."""
    if len(world.local_ranks()) == world.size:
        return [local_values[r] for r in range(world.size)]
    return world.agree(local_values[world.rank])


def model_state_bytes(plan, rank) -> int:
    """Bytes of parameters, gradients and optimizer state `rank` keeps."""
    roles = {t.name: t.role for t in plan.graph.tensors()}
    return sum(plan.meta[key].nbytes for key in plan.permanent[rank]
               if roles[key[0]] in MODEL_STATE_ROLES)


def train_mlp_preset(preset, args, comm, data):
    """(trainer, losses) of the digits MLP under `preset`."""
    options = argparse.Namespace(strategy=preset, batch=args.batch, accumulation=1, lr=3e-3,
                                 dtype="fp64", optimizer="adam", hidden=args.hidden,
                                 tile_bytes=args.tile_bytes, seed=0, log=None, progress=False)
    trainer = train_mlp.make_trainer(options, comm)
    return trainer, trainer.fit({"x": data["x_train"], "y": data["y_train"]}, args.steps)


def train_gpt2_preset(preset, args, comm, data):
    """(trainer, losses) of train_gpt2.py's model (fp64, AdamW, cosine rate) on its corpus."""
    layers, embd, heads, seq = args.gpt2.split(",")
    options = train_gpt2.parse_args([
        "--strategy", "single", "--n-layer", layers, "--n-embd", embd, "--n-head", heads,
        "--seq", seq, "--batch", str(args.batch), "--steps", str(args.steps),
        "--warmup", str(max(1, args.steps // 10)), "--dtype", "fp64"])
    options.strategy = preset   # a preset name or a mesh {axis: size}
    trainer = train_gpt2.make_trainer(options, comm)
    trainer.options = options     # --torch builds the same model, schedule and batches
    losses = [trainer.train_step([dict(zip(("input_ids", "targets"), train_batch(
        data, 0, step, options.seq, options.batch)))]) for step in range(args.steps)]
    return trainer, losses


MODELS = {"mlp": train_mlp_preset, "gpt2": train_gpt2_preset}


def run_preset(preset, args, comm, data) -> dict:
    trainer, losses = MODELS[args.model](preset, args, comm, data)
    cg, world = trainer.cg, trainer.world
    local = world.local_ranks()
    # of the last step: {field: (planned, measured)} and the measured stats, per rank
    versus = per_rank(world, {r: cg.stats_vs_plan(r) for r in local})
    stats = per_rank(world, {r: cg.get_stats(r) for r in local})
    plan = cg.plan

    def both(name):   # (planned, measured) per rank
        return [rank_versus[name] for rank_versus in versus]

    return {"preset": mesh_label(preset), "distribution": preset, "losses": losses,
            "options": getattr(trainer, "options", None),
            "versus": versus,
            "planned_peak": [p for p, _ in both("peak_bytes")],
            "measured_peak": [m for _, m in both("peak_bytes")],
            "model_state": [model_state_bytes(plan, r) for r in range(world.size)],
            "planned_sent": sum(p for p, _ in both("bytes_transferred")),
            "measured_sent": sum(m for _, m in both("bytes_transferred")),
            "measured_received": sum(m for _, m in both("bytes_received")),
            "planned_sent_per_rank": [p for p, _ in both("bytes_transferred")],
            "measured_sent_per_rank": [m for _, m in both("bytes_transferred")],
            "planned_flops": sum(p for p, _ in both("flops_executed")),
            "measured_flops": sum(m for _, m in both("flops_executed")),
            "phase_ms": phase_times(stats),
            "step_ms": statistics.median(e["step_time_ms"] for e in trainer.history[1:]),
            "traffic": traffic_by_kind(plan), "plan": plan,
            "params": plan.graph.num_parameters(), "world": world}


def phase_times(stats) -> dict:
    """Measured kernel + receive-wait ms per phase, slowest rank."""
    phases = {phase for s in stats for phase in s.by_phase}
    return {phase: max(s.by_phase[phase].kernel_ms + s.by_phase[phase].wait_ms
                       for s in stats if phase in s.by_phase) for phase in sorted(phases)}


def human(count) -> str:
    """Bytes in KiB, the one unit of every table and comparison here."""
    return f"{count / 1024:.1f} KiB"


def kib(count) -> str:
    return f"{count / 1024:.1f}"


def aligned(headers, rows) -> str:
    """A table whose every column is as wide as its widest cell, header included, with
    two spaces between columns (per-rank values inside a cell are joined by "/")."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    lines = [headers, *rows]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(line, widths)))
                      for line in lines)


def print_table(results, ranks):
    print("per step, bytes in KiB (rank 0/rank 1/... where it says /rank); plan = the "
          "plan's analysis, measured = buffers handed to MPI, the tile store's allocator, "
          "the executor's clock")
    headers = ["preset", "peak/rank plan", "peak/rank measured", "model state/rank",
               "sent/rank plan", "sent/rank measured", "recv measured", "MFLOP plan",
               "MFLOP counted", "ms/step", "final loss"]
    rows = [[r["preset"], "/".join(kib(b) for b in r["planned_peak"]),
             "/".join(kib(b) for b in r["measured_peak"]),
             "/".join(kib(b) for b in r["model_state"]),
             "/".join(kib(b) for b in r["planned_sent_per_rank"]),
             "/".join(kib(b) for b in r["measured_sent_per_rank"]), kib(r["measured_received"]),
             f"{r['planned_flops'] / 1e6:.2f}", f"{r['measured_flops'] / 1e6:.2f}",
             f"{r['step_ms']:.2f}", f"{r['losses'][-1]:.8f}"] for r in results]
    print(aligned(headers, rows))
    print("measured ms per phase (kernels + waiting for tiles, slowest rank): "
          + "; ".join(f"{r['preset']} " + ", ".join(f"{phase} {ms:.2f}" for phase, ms
                                                   in r["phase_ms"].items())
                      for r in results))


def plan_mismatches(results) -> list:
    """Every (preset, rank, field) whose measured value differs from the plan's."""
    return [f"{r['preset']} rank {rank}: {name} planned {planned}, measured {measured}"
            for r in results for rank, versus in enumerate(r["versus"])
            for name, (planned, measured) in versus.items() if planned != measured]


def traffic_by_kind(plan) -> dict:
    """Planned bytes sent per step, all ranks, split by what moves: parameter tiles,
    gradient tiles of parameters (partial sums and their broadcasts), activations."""
    tensors = {t.name: t for t in plan.graph.tensors()}
    result = {"parameters": 0, "gradients": 0, "activations": 0}
    for rank in range(plan.nranks):
        for instruction in plan.program(rank):
            if type(instruction) is Send:
                base = tensors[instruction.key[0].split("~")[0]]   # partials: name~op~rank
                kind = ("parameters" if base.role == "parameter" else
                        "gradients" if base.persistent and base.grad_of else "activations")
                result[kind] += instruction.nbytes
    return result


def print_zero_comparison(results, ranks):
    """The ZeRO paper's per-rank estimates next to ours (fp64 Adam: no fp16 copies)."""
    by_name = {r["preset"]: r for r in results}
    psi = results[0]["params"] * 8          # Ψ in bytes: parameters x 8 bytes (fp64)
    n = ranks
    print(f"\nZeRO formulas, Ψ = {results[0]['params']} parameters x 8 B = {human(psi)}, "
          f"N = {n}. fp64 Adam keeps 4 copies of Ψ: parameters, gradients, m, v "
          "(the paper's 2Ψ+2Ψ+KΨ is for fp16 weights with an fp32 master copy).")
    rows = [("DDP", "ddp", 4 * psi, 2 * (n - 1) / n * psi, "4Ψ", "2Ψ(N-1)/N"),
            ("FSDP/ZeRO-3", "fsdp", 4 * psi / n, 3 * (n - 1) / n * psi, "4Ψ/N",
             "3Ψ(N-1)/N")]
    for label, preset, memory, traffic, memory_formula, traffic_formula in rows:
        ours = by_name[preset]
        sent = ours["measured_sent"] / n
        parts = ", ".join(f"{kind} {b / n / psi:.2f}Ψ" for kind, b in ours["traffic"].items())
        print(f"  {label:11s} model state/rank: formula {memory_formula} = {human(memory)}, "
              f"ours {' '.join(human(b) for b in ours['model_state'])}")
        print(f"  {'':11s} sent/rank/step:   formula {traffic_formula} = {human(traffic)}, "
              f"ours {human(sent)} = {sent / psi:.2f}Ψ ({parts})")
    if n > 1:
        print(EXPLANATION)


EXPLANATION = """\
  How ours compare: model state per rank is the formula's, up to tile granularity
  (uneven tiles make FSDP shards unequal). Traffic differs for two reasons. (1) A sum
  over the batch (dW = dY·Xᵀ) is planned either as partial sums reduced in a fixed
  tree to the tile's owner (broadcast back down when the gradient is replicated: an
  all-reduce, 2Ψ(N-1)/N) or by sending the activation tiles to the owner, whichever
  moves fewer bytes; with a small per-rank batch the activations are often smaller
  than a weight gradient, so DDP (and FSDP, for some layers) moves activations instead
  (the split in parentheses) and sends less than the formula. (2)
  FSDP's parameter tiles are received once per step: a received tile stays cached
  until its last use, which here runs from forward into backward, so the paper's
  second all-gather (parameters again for backward) is not needed, and the first
  layer's weights are not needed in backward at all (x has no gradient): FSDP sends
  ~1 all-gather + 1 reduce-scatter instead of 3Ψ. The price: a gathered tile that
  backward uses again stays resident in between (tiny here); every other gathered
  tile is freed right after its last use, so nothing holds a whole layer's buffer."""


def print_megatron_comparison(results, args, n):
    """Megatron-LM's TP traffic (Shoeybi et al. 2019; Narayanan et al. 2021) next to ours.

    Per transformer layer, TP all-reduces the [B, T, h] activations twice in forward
    (after attention's c_proj and the MLP's c_proj) and twice in backward (the inputs'
    gradients of the column-parallel q/k/v and c_fc); a ring all-reduce sends
    2(N-1)/N of the message per rank. The vocab-parallel embedding and tied head add
    one all-reduce of [B, T, h] each (forward embedding output, backward head input)."""
    layers, embd, _, seq = (int(v) for v in args.gpt2.split(","))
    activation = args.batch * seq * embd * 8                     # B·T·h fp64 bytes
    ring = 2 * (n - 1) / n
    per_layer = 4 * ring * activation
    total = layers * per_layer + 2 * ring * activation
    tp = next(r for r in results if r["preset"] == "tp")
    sent = tp["measured_sent"] / n
    parts = ", ".join(f"{kind} {human(b / n)}" for kind, b in tp["traffic"].items())
    print(f"\nMegatron TP formula, B·T·h = {args.batch}·{seq}·{embd} x 8 B = "
          f"{human(activation)}, N = {n}, L = {layers}:")
    print(f"  per layer 4 all-reduces x 2(N-1)/N x BTh = {human(per_layer)}/rank/step; "
          f"L layers + embedding and head: {human(total)}/rank/step")
    print(f"  ours (tp, measured): {human(sent)}/rank/step ({parts})")
    if n > 1:
        print("  Ours differs where the planner picks the cheaper of two ways for a sum "
              "over tiles\n  (partials reduced to the owner vs the inputs sent there), "
              "because the vocab-parallel\n  loss also reduces its max and sum-exp (B·T "
              "each), and by the parameter tiles the plan\n  sends under tp (Megatron "
              "sends none; at the default shape each rank sends its whole\n  shard of "
              "the q/k/v, attention c_proj and wte weights to the other: those are "
              "gathered).")


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        left.plot(range(1, len(r["losses"]) + 1), r["losses"], label=r["preset"],
                  linestyle=("-", "--", ":", "-.")[results.index(r) % 4])
    left.set(xlabel="step", ylabel="training loss", yscale="log", title="loss (fp64)")
    left.legend()
    ranks = len(results[0]["planned_peak"])
    width = 0.8 / len(results)
    for index, r in enumerate(results):
        positions = np.arange(ranks) + index * width
        right.bar(positions, np.array(r["planned_peak"]) / 1024, width, label=r["preset"])
    right.set(xlabel="rank", ylabel="planned peak KiB", title="memory per rank",
              xticks=np.arange(ranks) + 0.4 - width / 2, xticklabels=list(range(ranks)))
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def check_agreement(results):
    reference = np.array(results[0]["losses"])
    for r in results[1:]:
        relative = np.abs(np.array(r["losses"]) - reference) / np.abs(reference)
        if relative.max() > TOLERANCE:
            step = int(relative.argmax()) + 1
            raise SystemExit(f"FAILED: {r['preset']} loss differs from single by "
                             f"{relative.max():.2e} relative at step {step} (> {TOLERANCE})")
    return max(float((np.abs(np.array(r["losses"]) - reference) / np.abs(reference)).max())
               for r in results)


def model_graph(args):
    """The graph the trainers of --model compile: model, loss, gradients, Adam(W)."""
    if args.model == "mlp":
        model = nt.models.build_mlp([64, *args.hidden, 10], args.batch, dtype="fp64")
    else:
        layers, embd, heads, seq = (int(v) for v in args.gpt2.split(","))
        config = nt.models.gpt2.GPT2Config(vocab_size=train_gpt2.corpus.VOCAB,
                                           n_positions=seq, n_embd=embd, n_layer=layers,
                                           n_head=heads)
        model = nt.models.gpt2.build_gpt2(config, batch=args.batch, seq=seq, dtype="fp64")
    add_optimizer(model.graph, model.params, model.grads,
                  "adam" if args.model == "mlp" else "adamw")
    return model.graph


def print_autoplan(args, comm, top=10):
    """nt.autoplan's candidates, fastest first (by their trial steps where the search ran
    them on these ranks, else predicted; rank 0 prints)."""
    lines = []
    candidates = nt.autoplan(model_graph(args), comm, memory_budget=args.memory_budget,
                             machine=args.machine, log=lines.append)
    world = make_world(comm, None)
    if world.rank != 0:
        return
    print(f"{args.model}: nt.autoplan on {world.size} rank(s), memory budget "
          f"{args.memory_budget or 'none'}; {len(candidates)} candidates, the first "
          f"{min(top, len(candidates))}:")
    headers = ["#", "candidate", "predicted ms/step", "trial ms/step", "peak KiB/rank",
               "sent KiB/rank"]
    rows = [[str(index), c.label, f"{c.predicted_step_s * 1e3:.2f}",
             "-" if c.trial_step_s is None else f"{c.trial_step_s * 1e3:.2f}",
             kib(c.peak_bytes_per_rank), kib(c.bytes_sent_per_rank)]
            for index, c in enumerate(candidates[:top], 1)]
    print(aligned(headers, rows))
    print("\n".join(lines))


def side_by_side_with_torch(args):
    """Our ddp and fsdp, then torch DDP and FSDP2, on this job's MPI ranks."""
    from mpi4py import MPI
    data = train_gpt2.corpus.load_corpus(200_000).train
    ours = [run_preset(preset, args, None, data) for preset in ("ddp", "fsdp")]
    options = ours[0]["options"]
    model = train_gpt2.build_model(options)
    state = torch_side.initial_state(model, model.init_params(
        np.random.default_rng(options.seed)))
    schedule = train_gpt2.CosineSchedule(options.lr, total=args.steps,
                                         warmup=min(options.warmup, args.steps),
                                         min_lr=options.lr / 10)
    batches = [train_batch(data, 0, step, options.seq, options.batch)
               for step in range(args.steps)]
    theirs = [torch_side.run_torch(kind, model.config, state, batches, schedule,
                                   options.weight_decay, MPI.COMM_WORLD)
              for kind in ("ddp", "fsdp2")]
    if MPI.COMM_WORLD.rank == 0:
        torch_side.print_side_by_side(ours, theirs, MPI.COMM_WORLD.size)


def main(argv=None):
    args = parse_args(argv)
    comm = nt.SimulatedWorld(args.simulate) if args.simulate else None
    if args.auto:
        return print_autoplan(args, comm)
    if args.torch:
        return side_by_side_with_torch(args)
    data = (train_mlp.load_data(0, np.float64) if args.model == "mlp" else
             train_gpt2.corpus.load_corpus(200_000).train)
    results = [run_preset(preset, args, comm, data) for preset in PRESETS]
    world = results[0]["world"]
    results += [run_preset(mesh, args, comm, data)
                for mesh in meshes_for(world.size, model_layers(args))]
    worst = check_agreement(results)
    if world.rank == 0:
        print(f"{args.model}: {world.size} rank(s), {args.steps} steps, batch {args.batch}, "
              "fp64 Adam(W)")
        print_table(results, world.size)
        wrong = plan_mismatches(results)
        print("planned == measured (peak bytes, bytes sent and received, FLOPs, per "
              f"rank): {'yes, for every preset' if not wrong else 'NO'}")
        print_zero_comparison(results, world.size)
        if args.model == "gpt2":
            print_megatron_comparison(results, args, world.size)
        print_mesh_comparison(results, args)
        print(f"\nloss curves of all presets agree: max relative difference {worst:.1e} "
              f"(tolerance {TOLERANCE})")
        if args.plot:
            plot(results, args.plot)
            print(f"plot written to {args.plot}")
    wrong = plan_mismatches(results)   # every rank holds all ranks' comparisons
    if wrong:
        raise SystemExit("FAILED: measurements differ from the plan: " + "; ".join(wrong))


if __name__ == "__main__":
    main()
