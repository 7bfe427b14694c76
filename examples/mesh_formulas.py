"""The mesh rows of compare_strategies.py: which meshes a world splits into, and the
formulas the plan's traffic per mesh axis is set against (DDP's ring all-reduce,
ZeRO-3's gathers and reduce-scatters, Megatron's tensor-parallel all-reduces, the
activations and their gradients crossing pipeline stage boundaries).
"""

from __future__ import annotations

import numpy as np

from nntile_spmd.plan.mesh import Mesh, traffic_by_mesh_axis


def human(count) -> str:
    """Bytes in KiB, as compare_strategies.py writes them."""
    return f"{count / 1024:.1f} KiB"


def axes_of(mesh) -> dict:
    """{axis: ranks} of a mesh given as a dict or a Mesh."""
    return dict(mesh.items() if isinstance(mesh, dict) else mesh.axes)


def meshes_for(nranks, layers=0) -> list:
    """dp x tp, fsdp x tp and dp x fsdp (HSDP) for every split of the world into two
    axes of >= 2 ranks;
    with `layers` (the model's), pp on the whole world and dp x pp where each stage
    gets a layer."""
    splits = [(outer, nranks // outer) for outer in range(2, nranks)
              if nranks % outer == 0 and nranks // outer >= 2]
    meshes = [{batch: outer, "tp": inner} for outer, inner in splits
              for batch in ("dp", "fsdp")]
    meshes += [{"dp": outer, "fsdp": inner} for outer, inner in splits]   # HSDP
    if 2 <= nranks <= layers:
        meshes.append({"pp": nranks})
    return meshes + [{"dp": outer, "pp": inner} for outer, inner in splits if inner <= layers]


def model_layers(args) -> int:
    return int(args.gpt2.split(",")[0]) if args.model == "gpt2" else len(args.hidden) + 1


def label(distribution) -> str:
    return distribution if isinstance(distribution, str) else Mesh(
        tuple(distribution.items())).name


def mesh_axis_formulas(plan, mesh, tp_activation_bytes, pp_boundary_bytes=0) -> dict:
    """Bytes all ranks send per step along each mesh axis, by the formulas: the batch
    axis all-reduces (dp: 2(d-1)/d, ring) or all-gathers and reduce-scatters (fsdp,
    ZeRO-3: 3(f-1)/f) each tp column's parameters Ψ_col (with both, HSDP, dp all-reduces
    a rank's fsdp shard Ψ_col / f); the tp axis all-reduces
    (2(t-1)/t) the activations Megatron does, `tp_activation_bytes` per dp row; the
    pp axis sends `pp_boundary_bytes` (pipeline_boundary_bytes)."""
    mesh = Mesh(tuple(mesh.items()))
    sizes = dict(mesh.axes)
    factor = {"dp": lambda d: 2 * (d - 1) / d, "fsdp": lambda f: 3 * (f - 1) / f}
    result = {}
    for axis, size in mesh.axes:
        if axis == "pp":
            result[axis] = pp_boundary_bytes
        elif axis == "tp":
            rows = plan.nranks // size
            result[axis] = plan.nranks * 2 * (size - 1) / size * tp_activation_bytes / rows
        else:
            # HSDP (dp x fsdp): dp all-reduces each rank's fsdp shard, Ψ_col / f
            shard = sizes.get("fsdp", 1) if axis == "dp" else 1
            result[axis] = sum(factor[axis](size) * column_parameter_bytes(plan, mesh, rank)
                               for rank in range(plan.nranks)) / shard
    assert set(result) == set(sizes)
    return result


def column_parameter_bytes(plan, mesh, rank) -> int:
    """Ψ_col: bytes of the parameter tiles held on `rank`'s column (the ranks with its
    tp and pp indices): the share of the model the batch axis has to synchronize."""
    names = [name for name, _ in mesh.axes]
    kept = [names.index(axis) for axis in ("tp", "pp") if axis in names]
    here = np.unravel_index(rank, mesh.shape)
    column = {r for r in range(plan.nranks)
              if all(np.unravel_index(r, mesh.shape)[a] == here[a] for a in kept)}
    return sum(plan.meta[(tensor.name, coord)].nbytes for tensor in plan.graph.tensors()
               if tensor.role == "parameter"
               for coord in plan.tilings[tensor.name].coords()
               if column & set(plan.ranks_of_owner(plan.owner_of((tensor.name, coord)))))


def megatron_activation_bytes(args, plan, mesh) -> int:
    """Bytes of the activations Megatron all-reduces over tp per step, whole batch: per
    GPT-2 layer 4 x [B, T, h] plus embedding and head; for the MLP the outputs of its
    row-parallel layers (weights [out, in] split along `in`; x needs no gradient, so
    the column-parallel first layer sends nothing in backward)."""
    if "tp" not in mesh:
        return 0
    if args.model == "gpt2":
        layers, embd, _, seq = (int(v) for v in args.gpt2.split(","))
        return (4 * layers + 2) * args.batch * seq * embd * 8
    tp = list(mesh).index("tp")
    return sum(tensor.shape[0] * args.batch * 8 for tensor in plan.graph.tensors()
               if tensor.role == "parameter" and tensor.ndim == 2
               and plan.distributions[tensor.name].mesh.rules[tp].spelling() == ("block", 1))


def pipeline_boundary_bytes(args, mesh) -> int:
    """Bytes sent per step along pp: at each boundary between consecutive stages the
    activations [batch, (seq,) width] forward and their gradients back, fp64. Stages
    hold consecutive layers, the first stages one more when they do not divide."""
    stages = axes_of(mesh).get("pp", 1)
    if args.model == "gpt2":
        layers, embd, _, seq = (int(v) for v in args.gpt2.split(","))
        widths = [seq * embd] * (layers - 1)
    else:
        widths = list(args.hidden)
    stage = [index * stages // (len(widths) + 1) for index in range(len(widths) + 1)]
    return sum(2 * args.batch * width * 8 for index, width in enumerate(widths)
               if stage[index] != stage[index + 1])


def print_mesh_comparison(results, args):
    """Per mesh: planned bytes sent per step along each mesh axis next to the formulas."""
    meshes = [r for r in results if not isinstance(r["distribution"], str)]
    if not meshes:
        return
    print("\nMeshes (ranks on a grid, first axis outermost): planned bytes sent per step, "
          "all ranks, per mesh axis,\nvs the formulas (dp: DDP all-reduce 2(d-1)/d Ψ_col, "
          "fsdp: ZeRO-3 3(f-1)/f Ψ_col, with fsdp dp all-reduces the shard Ψ_col/f,\ntp: "
          "Megatron 2(t-1)/t x activations of a dp row, pp: "
          "2 x batch x (seq x) width x 8 per stage boundary)")
    for r in meshes:
        plan, mesh = r["plan"], r["distribution"]
        ours = traffic_by_mesh_axis(plan, mesh)
        formula = mesh_axis_formulas(plan, mesh, megatron_activation_bytes(args, plan, mesh),
                                     pipeline_boundary_bytes(args, mesh))
        parts = "; ".join(f"{axis} ours {human(ours.get(axis, 0))} formula "
                          f"{human(formula[axis])}" for axis in formula)
        other = {axis: b for axis, b in ours.items() if axis not in formula and b}
        extra = "; ".join(f"{axis} {human(b)}" for axis, b in other.items())
        print(f"  {r['preset']:10s} {parts}" + (f"; across both: {extra}" if extra else ""))
    print("  As above: fsdp sends ~2/3 of ZeRO-3's formula (parameters gathered once per "
          "step), and with few\n  samples per rank the planner sends activation tiles "
          "instead of all-reducing a gradient,\n  which is cheaper and may cross both "
          "axes (tests/plan/test_mesh.py checks the formulas at 240\n  samples, where "
          "the all-reduce is the cheaper way: within 1 %).")
    if any("pp" in axes_of(r["distribution"]) for r in meshes):
        tied = ("GPT-2's tied embedding (wte) and its gradient cross from the\n  first stage "
                "to the last and back; " if args.model == "gpt2" else "")
        print(f"  pp: beside the boundary activations, {tied}with a batch axis a stage's "
              "first weight\n  gradient is summed next to the previous stage's activations "
              "(tests/plan/test_pipeline.py).")


def main(argv=None):
    """The meshes compare_strategies.py adds for a world of --ranks ranks."""
    import argparse

    from nntile_spmd.train.cli import DefaultsHelpFormatter
    parser = argparse.ArgumentParser(description="The meshes examples/compare_strategies.py "
                                     "compares for a world size (this module is its library)",
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--ranks", type=int, default=4, help="world size")
    parser.add_argument("--layers", type=int, default=2, help="the model's layers (pp)")
    args = parser.parse_args(argv)
    meshes = meshes_for(args.ranks, args.layers)
    print(f"{args.ranks} ranks, {args.layers} layers: "
          + (", ".join(label(mesh) for mesh in meshes) or "no mesh of two axes"))


if __name__ == "__main__":
    main()
