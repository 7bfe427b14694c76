"""The cpu kernel table: numba loops (disk-cached with cache=True) and BLAS for gemm.

Arrays only: never imports nntile_spmd, mpi4py or cupy. Same keys, signatures and
semantics as kernels.reference.
"""

from . import cpu_blas, cpu_elementwise, cpu_loss, cpu_optim, cpu_reduce, reference

KERNELS = {
    "gemm": cpu_blas.gemm,
    "transpose": cpu_reduce.transpose,
    "add": cpu_elementwise.add,
    "multiply": cpu_elementwise.multiply,
    "scale": cpu_elementwise.scale,
    # NumPy's own fill/memcpy/cast loops are already what a numba loop would be.
    "add_scalar": reference.add_scalar,
    "fill": reference.fill,
    "clear": reference.clear,
    "copy": reference.copy,
    "cast": reference.cast,
    "gelu": cpu_elementwise.gelu,
    "gelutanh": cpu_elementwise.gelutanh,
    "relu": cpu_elementwise.relu,
    "silu": cpu_elementwise.silu,
    "sqrt": cpu_elementwise.sqrt,
    "gelu_backward": cpu_elementwise.gelu_backward,
    "gelutanh_backward": cpu_elementwise.gelutanh_backward,
    "relu_backward": cpu_elementwise.relu_backward,
    "silu_backward": cpu_elementwise.silu_backward,
    "sqrt_backward": cpu_elementwise.sqrt_backward,
    "sum": cpu_reduce.sum,
    "sum_fiber": cpu_reduce.sum_fiber,
    "add_fiber": cpu_reduce.add_fiber,
    "softmax": cpu_reduce.softmax,
    "softmax_backward": reference.softmax_backward,   # vectorised NumPy is enough here
    "logsumexp": cpu_reduce.logsumexp,
    "maxsumexp": cpu_reduce.maxsumexp,
    "cross_entropy": cpu_loss.cross_entropy,
    "cross_entropy_backward": cpu_loss.cross_entropy_backward,
    "mse": cpu_loss.mse,
    "mse_backward": cpu_loss.mse_backward,
    "embedding": cpu_loss.embedding,
    "embedding_backward": cpu_loss.embedding_backward,
    "sgd_step": cpu_optim.sgd_step,
    "adam_step": cpu_optim.adam_step,
    "adamw_step": cpu_optim.adamw_step,
}
