"""Graph layer: registry entries and backward rules of gemm, transpose (NNTile's cyclic
one: the first ndim dims moved to the end) and permute (any permutation of the dims).

A is [M..., K..., batch...] (trans_a: [K..., M..., batch...]), B is
[K..., N..., batch...] (trans_b: [N..., K..., batch...]), C is [M..., N..., batch...];
ndim counts the K dims, batch_ndim the trailing batch dims.
"""

from __future__ import annotations

from .. import ops
from ..checks import numel, require_float, require_same_dtype
from ..dtypes import FAST_FP32_COMPUTE
from ..gradients import refuse_accumulating_output
from ..registry import OpSpec, add_entries, labels, op_error

ENTRIES: list[OpSpec] = []   # the family's registry entries, in writing order
add_spec = ENTRIES.append   # each add_spec(OpSpec(...)) below joins ENTRIES


def gemm_rule(op, ctx):
    a, b = op.inputs
    c = op.outputs[0]
    attrs = op.attrs
    refuse_accumulating_output(op, ctx)
    dc, alpha = ctx.grad(c), attrs["alpha"]
    trans_a, trans_b, batch_ndim = attrs["trans_a"], attrs["trans_b"], attrs["batch_ndim"]
    m_count = a.ndim - attrs["ndim"] - batch_ndim
    n_count = b.ndim - attrs["ndim"] - batch_ndim
    if ctx.needs(a):
        if trans_a:   # dA[K, M] = op(B)[K, N] . dC^T
            ops.gemm(b, dc, ctx.grad(a), alpha, 1.0, trans_b, True, n_count, batch_ndim)
        else:         # dA[M, K] = dC[M, N] . op(B)^T
            ops.gemm(dc, b, ctx.grad(a), alpha, 1.0, False, not trans_b, n_count, batch_ndim)
    if ctx.needs(b):
        if trans_b:   # dB[N, K] = dC^T . op(A)[M, K]
            ops.gemm(dc, a, ctx.grad(b), alpha, 1.0, True, trans_a, m_count, batch_ndim)
        else:         # dB[K, N] = op(A)^T . dC[M, N]
            ops.gemm(a, dc, ctx.grad(b), alpha, 1.0, not trans_a, False, m_count, batch_ndim)


def transpose_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):
        back = ops.transpose(ctx.grad(y), ctx.temp(f"{x.name}_dtransposed"),
                             op.attrs["alpha"], y.ndim - op.attrs["ndim"])
        ops.add_inplace(1.0, back, 1.0, ctx.grad(x))


def permute_rule(op, ctx):
    (x,), (y,) = op.inputs, op.outputs
    if ctx.needs(x):   # dx = alpha * dy with the inverse permutation
        back = ops.permute(ctx.grad(y), ctx.temp(f"{x.name}_dpermuted"),
                           inverse_permutation(op.attrs["perm"]), op.attrs["alpha"])
        ops.add_inplace(1.0, back, 1.0, ctx.grad(x))


def inverse_permutation(perm) -> tuple:
    inverse = [0] * len(perm)
    for position, dim in enumerate(perm):
        inverse[dim] = position
    return tuple(inverse)


GEMM_ATTRS = {"alpha": 1.0, "beta": 0.0, "trans_a": False, "trans_b": False,
              "ndim": 1, "batch_ndim": 0}


def gemm_split(op, attrs, a, b):
    """Split A's and B's shapes into (M, K, N, batch) dim tuples, checking them."""
    ndim, batch_ndim = attrs["ndim"], attrs["batch_ndim"]
    if not (isinstance(ndim, int) and ndim >= 0 and isinstance(batch_ndim, int)
            and batch_ndim >= 0):
        raise op_error(op, f"ndim={ndim!r} and batch_ndim={batch_ndim!r} must be ints >= 0",
                       (a, b))
    for tensor in (a, b):
        if tensor.ndim < ndim + batch_ndim:
            raise op_error(op, f"{tensor.name} has {tensor.ndim} dims, fewer than "
                           f"ndim + batch_ndim = {ndim + batch_ndim}", (a, b))
    a_core = a.shape[:a.ndim - batch_ndim]
    b_core = b.shape[:b.ndim - batch_ndim]
    m_count, n_count = len(a_core) - ndim, len(b_core) - ndim
    if attrs["trans_a"]:
        k_a, m_dims = a_core[:ndim], a_core[ndim:]
    else:
        m_dims, k_a = a_core[:m_count], a_core[m_count:]
    if attrs["trans_b"]:
        n_dims, k_b = b_core[:n_count], b_core[n_count:]
    else:
        k_b, n_dims = b_core[:ndim], b_core[ndim:]
    if k_a != k_b:
        raise op_error(op, f"contracted dims differ ({list(k_a)} != {list(k_b)})", (a, b))
    batch_a, batch_b = a.shape[a.ndim - batch_ndim:], b.shape[b.ndim - batch_ndim:]
    if batch_a != batch_b:
        raise op_error(op, f"batch dims differ ({list(batch_a)} != {list(batch_b)})", (a, b))
    return m_dims, k_a, n_dims, batch_a


def gemm_infer(op, attrs, inputs):
    a, b = inputs
    require_float(op, a, b)
    require_same_dtype(op, a, b)
    m_dims, _, n_dims, batch = gemm_split(op, attrs, a, b)
    return [(m_dims + n_dims + batch, a.dtype)]


def gemm_compute_type(in_dtypes, out_dtypes):
    """fp32_fast_* tensors: the reduced type gemm rounds its inputs to (docs/precision.md)."""
    compute_type = FAST_FP32_COMPUTE.get(in_dtypes[0])
    return {} if compute_type is None else {"compute_type": compute_type}


def gemm_axes(attrs, in_shapes, out_shapes):
    a_shape, b_shape = in_shapes
    ndim, batch_ndim = attrs["ndim"], attrs["batch_ndim"]
    m = labels("m", len(a_shape) - ndim - batch_ndim)
    n = labels("n", len(b_shape) - ndim - batch_ndim)
    k, batch = labels("k", ndim), labels("b", batch_ndim)
    a = (k + m if attrs["trans_a"] else m + k) + batch
    b = (n + k if attrs["trans_b"] else k + n) + batch
    return a, b, m + n + batch


def gemm_flops(attrs, in_shapes, out_shapes):
    a_shape = in_shapes[0]
    batch_ndim = attrs["batch_ndim"]
    core = a_shape[:len(a_shape) - batch_ndim]
    k_dims = core[:attrs["ndim"]] if attrs["trans_a"] else core[len(core) - attrs["ndim"]:]
    return 2 * numel(out_shapes[0]) * numel(k_dims)


add_spec(OpSpec(name="gemm", kernel="gemm", num_inputs=2, num_outputs=1, infer=gemm_infer,
                axes=gemm_axes, attrs=GEMM_ATTRS, reads_output=lambda attrs: attrs["beta"] != 0,
                beta_attr="beta", flops=gemm_flops, dtype_params=gemm_compute_type,
                backward=gemm_rule))


def transpose_infer(op, attrs, inputs):
    (x,) = inputs
    ndim = attrs["ndim"]
    if not isinstance(ndim, int) or not 0 <= ndim <= x.ndim:
        raise op_error(op, f"ndim={ndim!r} out of range for {x.ndim} dims", inputs)
    return [(x.shape[ndim:] + x.shape[:ndim], x.dtype)]


def transpose_axes(attrs, in_shapes, out_shapes):
    x = labels("d", len(in_shapes[0]))
    ndim = attrs["ndim"]
    return x, x[ndim:] + x[:ndim]


add_spec(OpSpec(name="transpose", kernel="transpose", num_inputs=1, num_outputs=1,
                infer=transpose_infer, axes=transpose_axes, attrs={"alpha": 1.0, "ndim": 1},
                flops=lambda attrs, i, o: numel(o[0]), backward=transpose_rule))


def permute_infer(op, attrs, inputs):
    (x,) = inputs
    perm = attrs["perm"]
    if not isinstance(perm, tuple) or sorted(perm) != list(range(x.ndim)) or \
            any(isinstance(dim, bool) or not isinstance(dim, int) for dim in perm):
        raise op_error(op, f"perm={perm!r} is not a permutation of the {x.ndim} dims "
                       f"0..{x.ndim - 1}", inputs)
    return [(tuple(x.shape[dim] for dim in perm), x.dtype)]


def permute_axes(attrs, in_shapes, out_shapes):
    x = labels("d", len(in_shapes[0]))
    return x, tuple(x[dim] for dim in attrs["perm"])


add_spec(OpSpec(name="permute", kernel="permute", num_inputs=1, num_outputs=1,
                infer=permute_infer, axes=permute_axes, attrs={"alpha": 1.0, "perm": ()},
                flops=lambda attrs, i, o: numel(o[0]), backward=permute_rule))


def register(registry: dict) -> None:
    """Add the linalg entries to `registry` (graph/families.py calls it)."""
    add_entries(registry, ENTRIES)

