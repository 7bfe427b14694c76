"""Graph layer: the one refusal shared by backward rules of ops with a `beta`.

An op computing `out = f(inputs) + beta * out` keeps part of its old output. When that
old output is itself differentiated, its gradient would be beta times the new one's;
the rules do not build that, so they refuse with an error naming the op and the tensor.
A leaf module (no imports), so rules living beside their op builders can use it.
"""

from __future__ import annotations


def refuse_accumulating_output(op, ctx, out=None, keeps=(0.0,)):
    """Raise NotImplementedError if `op`'s beta is not in `keeps` and its output `out`
    (default the first) is differentiated. `keeps` may include 1.0 for ops whose old
    value, added unchanged, has the same gradient as the new one."""
    out = op.outputs[0] if out is None else out
    beta = op.attrs["beta"]
    if beta not in keeps and out.name in ctx.needed:
        raise NotImplementedError(f"grad: {op.name} accumulates into {out.name} "
                                  f"(beta={beta}); use beta=0 (a new output) in "
                                  f"differentiated code")
