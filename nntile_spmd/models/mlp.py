"""Models layer: a multilayer perceptron classifier/regressor as a LogicalGraph.

Layout follows the framework: column-major, batch trailing, so x is [features, batch],
w_i is [out, in] (like torch.nn.Linear.weight) and b_i is [out]. Builds ops through
nntile_spmd.graph and models/losses.py only; imports no plan, runtime, numba or mpi4py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import LogicalGraph, grad, ops
from ..graph.dtypes import FLOAT_DTYPES, storage_dtype
from .losses import LOSSES, add_loss

ACTIVATIONS = {"gelu": ops.gelu, "gelutanh": ops.gelutanh, "relu": ops.relu,
               "silu": ops.silu}


class Classifier:
    """What the MLP and the CNN share: inputs x (features) and y (labels), params."""

    @property
    def inputs(self) -> tuple:
        """Names of the tensors bound per micro-batch: ("x", "y")."""
        return (self.x.name, self.y.name)

    @property
    def param_names(self) -> list:
        return [p.name for p in self.params]


@dataclass
class MLP(Classifier):
    """An MLP graph with the names a Trainer needs (inputs, parameters, loss, grads)."""

    graph: LogicalGraph
    layer_sizes: tuple
    batch: int               # samples per optimizer step
    micro_batch: int         # samples per execute (the graph's batch dim)
    accumulation: int        # micro-batches per optimizer step
    dtype: str
    activation: str
    loss_kind: str
    x: object = None
    y: object = None
    logits: object = None
    loss: object = None
    params: list = field(default_factory=list)
    grads: list = field(default_factory=list)

    def init_params(self, rng) -> dict:
        """PyTorch nn.Linear init: w, b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); NumPy arrays."""
        return init_linear_params(self.layer_sizes, rng, self.dtype)

    def forward_model(self, batch: int) -> MLP:
        """The same architecture as a forward-only graph (no grads) for `batch` samples."""
        return build_mlp(self.layer_sizes, batch, self.dtype, self.activation, self.loss_kind,
                         with_grads=False, name=f"{self.graph.name}_forward")

    def reference_forward(self, params: dict, x) -> np.ndarray:
        """NumPy logits (out, batch) for parameters `params` and inputs x (features, batch),
        in float64; the activation is the kernels' NumPy reference, its formula's one
        definition (tests/kernels checks it against PyTorch's)."""
        from nntile_kernels.reference import KERNELS   # NumPy and SciPy, loaded when asked
        activation = KERNELS[self.activation]
        h = np.asarray(x, dtype=np.float64)
        for layer in range(1, len(self.layer_sizes)):
            h = params[f"w{layer}"] @ h + params[f"b{layer}"][:, None]
            if layer < len(self.layer_sizes) - 1:
                activation(h, h)
        return h


def build_mlp(layer_sizes, batch: int, dtype: str = "fp32", activation: str = "gelu",
              loss: str = "cross_entropy", accumulation: int = 1, with_grads: bool = True,
              name: str = "mlp") -> MLP:
    """Build an MLP on inputs x [features, micro_batch] and targets y.

    `batch` is the number of samples per optimizer step; with accumulation=k the
    graph's batch dim is batch // k and the loss is scaled by 1/batch, so the sum
    of k micro-batch losses (and gradients) is the mean over the whole batch.
    y is int64 labels [micro_batch] for "cross_entropy", or [out, micro_batch]
    in `dtype` for "mse".
    """
    sizes = tuple(int(s) for s in layer_sizes)
    check_arguments(sizes, batch, dtype, activation, accumulation, loss)
    micro = batch // accumulation
    graph = LogicalGraph(name)
    model = MLP(graph, sizes, batch, micro, accumulation, dtype, activation, loss)
    model.x = graph.tensor([sizes[0], micro], "x", dtype=dtype, external=True)
    target_shape, target_dtype = ([micro], "int64") if loss == "cross_entropy" else \
        ([sizes[-1], micro], dtype)
    model.y = graph.tensor(target_shape, "y", dtype=target_dtype, external=True)
    hidden = model.x
    for layer in range(1, len(sizes)):
        weight = graph.tensor([sizes[layer], sizes[layer - 1]], f"w{layer}", dtype=dtype,
                              requires_grad=True, persistent=True)
        bias = graph.tensor([sizes[layer]], f"b{layer}", dtype=dtype, requires_grad=True,
                            persistent=True)
        model.params += [weight, bias]
        product = ops.gemm(weight, hidden, f"h{layer}")                     # (out, micro)
        hidden = ops.add_fiber(1.0, bias, 1.0, product, f"z{layer}", axis=0)
        if layer < len(sizes) - 1:
            hidden = ACTIVATIONS[activation](hidden, f"a{layer}")
    model.logits = hidden
    model.loss = add_loss(loss, hidden, model.y, "loss", alpha=1.0 / batch)
    model.loss.mark_output()
    if with_grads:
        model.grads = grad(graph, model.loss, model.params)
    return model


def check_arguments(sizes, batch, dtype, activation, accumulation, loss):
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"build_mlp: layer_sizes {list(sizes)} needs >= 2 positive sizes")
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"build_mlp: dtype {dtype!r} is not a float dtype")
    if activation not in ACTIVATIONS:
        raise ValueError(f"build_mlp: unknown activation {activation!r}; expected one of "
                         f"{sorted(ACTIVATIONS)}")
    if loss not in LOSSES:
        raise ValueError(f"build_mlp: unknown loss {loss!r}; expected one of {sorted(LOSSES)}")
    if accumulation < 1 or batch % accumulation or batch < 1:
        raise ValueError(f"build_mlp: batch {batch} must be a positive multiple of "
                         f"accumulation {accumulation}")


def init_linear_params(layer_sizes, rng, dtype="fp32") -> dict:
    """{w_i: (out, in), b_i: (out,)} drawn like torch.nn.Linear's default init."""
    numpy_dtype = storage_dtype(dtype)
    params = {}
    for layer in range(1, len(layer_sizes)):
        fan_in, fan_out = layer_sizes[layer - 1], layer_sizes[layer]
        bound = 1.0 / np.sqrt(fan_in)
        params[f"w{layer}"] = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(numpy_dtype)
        params[f"b{layer}"] = rng.uniform(-bound, bound, fan_out).astype(numpy_dtype)
    return params
