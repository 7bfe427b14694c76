"""Rounding fp32 gemm operands to a reduced type: the fp32_fast_* gemm modes.

Arrays only, written against an array module `xp` (NumPy or CuPy): never imports
nntile_spmd, mpi4py, numba or cupy. A gemm whose tensors are fp32_fast_tf32,
fp32_fast_bf16 or fp32_fast_fp16 gets ``compute_type`` "tf32", "bf16" or "fp16": its
inputs are rounded to that type (round to nearest, ties to even) and the product is
accumulated in fp32, which is what cuBLAS' fast fp32 compute types promise. tf32 and
bf16 keep fp32's exponent range and cut the significand to 10 and 7 bits; fp16 also
narrows the range (overflow gives inf, as a cast does).
"""

# explicit significand bits kept by the reduced types that share fp32's exponent
SIGNIFICAND_BITS = {"tf32": 10, "bf16": 7}
COMPUTE_TYPES = ("tf32", "bf16", "fp16")


def round_significand(xp, x, bits):
    """fp32 `x` rounded to `bits` significand bits, nearest-even, as a new fp32 array."""
    drop = 23 - bits
    u = x.view(xp.uint32)
    lsb = (u >> xp.uint32(drop)) & xp.uint32(1)
    rounded = (u + (xp.uint32((1 << (drop - 1)) - 1) + lsb)) & xp.uint32(~((1 << drop) - 1)
                                                                         & 0xFFFFFFFF)
    # a NaN's payload may carry into the exponent: keep NaNs as they are
    return xp.where(xp.isnan(x), x, rounded.view(xp.float32))


def round_operand(xp, x, compute_type):
    """A gemm operand as the reduced type's values (fp32 storage); None: `x` itself."""
    if compute_type is None:
        return x
    if x.dtype != xp.float32:
        raise TypeError(f"gemm: compute_type={compute_type!r} applies to fp32 tiles, "
                        f"got {x.dtype}")
    if compute_type == "fp16":
        return x.astype(xp.float16).astype(xp.float32, order="F")
    bits = SIGNIFICAND_BITS.get(compute_type)
    if bits is None:
        raise ValueError(f"gemm: unknown compute_type {compute_type!r}; expected one of "
                         f"{COMPUTE_TYPES} or None")
    return xp.asfortranarray(round_significand(xp, x, bits))
