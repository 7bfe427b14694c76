"""Graph layer: the op builders, one import per family, exposed to users as
`nntile_spmd.ops` (free functions with NNTile's argument names and order).

Each builder creates its output tensors from the op's shape rule and calls
LogicalGraph.add_op, which validates. An op's builder, registry entry and backward rule
live in its family (graph/<family>/ops.py, rules.py, backward.py); docs/architecture.md
lists the families.
"""

from __future__ import annotations

from .apply import apply, owner_graph  # noqa: F401 - ops.apply is the generic builder
from .elementwise.ops import (add, add_inplace, add_scalar, cast, clear, copy, div,  # noqa: F401
    fill, gelu, gelu_backward, gelu_inplace, gelutanh, gelutanh_backward,
    gelutanh_inplace, hypot, hypot_backward, hypot_inplace, hypot_scalar_inverse,
    multiply, multiply_inplace, pow, pow_backward, pow_inplace, relu, relu_backward,
    relu_inplace, scale, scale_inplace, sigmoid, sigmoid_backward, sigmoid_inplace,
    silu, silu_backward, silu_inplace, sqrt, sqrt_backward, sqrt_inplace, sub, tanh,
    tanh_backward, tanh_inplace)
from .linalg.ops import (gemm, permute, transpose)  # noqa: F401
from .reductions.ops import (add_fiber, add_fiber_inplace, add_slice,  # noqa: F401
    add_slice_inplace, extremum_backward, extremum_count, logsumexp,
    logsumexp_backward, max, maxsumexp, mean, min, multiply_fiber, multiply_slice,
    norm_fiber, norm_fiber_backward, norm_fiber_inplace, norm_slice,
    norm_slice_backward, norm_slice_inplace, scale_fiber, softmax, softmax_backward,
    softmax_from_logsumexp, softmax_from_logsumexp_backward, sum, sum_backward,
    sum_fiber, sum_slice, sumprod_fiber, sumprod_fiber_backward, sumprod_slice,
    sumprod_slice_backward, total_sum_accum)
from .norms import (batch_norm, layer_norm, rms_norm)  # noqa: F401
from .attention.ops import (flash_sdpa_bwd_cudnn, flash_sdpa_fwd_cudnn, mask_causal,  # noqa: F401
    mask_scalar, scaled_dot_product_attention)
from .losses.ops import (cross_entropy, cross_entropy_loss,  # noqa: F401
    cross_entropy_loss_backward, cross_entropy_lse, cross_entropy_lse_backward,
    cross_entropy_soft,
    mse_loss, mse_loss_backward, valid_count)
from .optimizers import (adam_step, adamw_step, sgd_step)  # noqa: F401
from .data_movement.ops import (concat, embedding, embedding_backward, gather,  # noqa: F401
    log_scalar, reshape, scatter, slice, slice_backward)
from .convolution.ops import (conv2d, conv2d_bwd_input_inplace,  # noqa: F401
    conv2d_bwd_weight_inplace, conv2d_inplace, copy_intersection)
from .rope.ops import (rope, rope_backward, scale_slice)  # noqa: F401
from .random.ops import (dropout, randn)  # noqa: F401
