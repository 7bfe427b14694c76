"""Models layer: a small convolutional classifier as a LogicalGraph (WHCN layout).

x is [W, H, C, batch] (column-major, batch trailing), each convolution kernel
[K_w, K_h, C_in, C_out] with a bias [C_out]; after the convolutions a gemm contracts
the three feature dims [W, H, C] with the classifier weight [classes, W, H, C], so no
reshape is needed. A strided convolution does the downsampling a pooling layer would.
Builds ops through nntile_spmd.graph and models/losses.py only; no plan, runtime or MPI.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import LogicalGraph, grad, ops
from ..graph.dtypes import FLOAT_DTYPES, storage_dtype
from .losses import add_loss
from .mlp import Classifier


@dataclass(frozen=True)
class ConvLayer:
    """One convolution + bias + relu: C_out channels, a square kernel, padding, stride."""

    channels: int
    kernel: int = 3
    padding: int = 1
    stride: int = 1


DIGITS_LAYERS = (ConvLayer(16), ConvLayer(32, stride=2))   # 8x8 -> 8x8x16 -> 4x4x32


@dataclass
class CNN(Classifier):
    """A CNN graph with the names a Trainer needs (inputs, parameters, loss, grads)."""

    graph: LogicalGraph
    image: tuple             # (W, H, C) of one input image
    layers: tuple            # ConvLayer per convolution
    classes: int
    batch: int               # samples per optimizer step
    micro_batch: int         # samples per execute (the graph's batch dim)
    accumulation: int
    dtype: str
    x: object = None
    y: object = None
    logits: object = None
    loss: object = None
    params: list = field(default_factory=list)
    grads: list = field(default_factory=list)

    def init_params(self, rng) -> dict:
        """PyTorch's Conv2d/Linear init: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        with the layer weight's fan-in; NumPy arrays."""
        numpy_dtype = storage_dtype(self.dtype)
        params = {}
        for p in self.params:
            weight = p.name.removesuffix("_bias")
            bound = 1.0 / np.sqrt(self.fan_in(weight))
            params[p.name] = np.asfortranarray(
                rng.uniform(-bound, bound, p.shape).astype(numpy_dtype))
        return params

    def fan_in(self, weight_name: str) -> int:
        """Inputs per output of a layer: K_w*K_h*C_in of a kernel, W*H*C of the classifier."""
        shape = self.graph.get_tensor(weight_name).shape
        return int(np.prod(shape[:-1] if weight_name.startswith("conv") else shape[1:]))

    def forward_model(self, batch: int) -> CNN:
        """The same architecture as a forward-only graph (no grads) for `batch` samples."""
        return build_cnn(self.image, self.layers, self.classes, batch, self.dtype,
                         with_grads=False, name=f"{self.graph.name}_forward")


def build_cnn(image=(8, 8, 1), layers=DIGITS_LAYERS, classes: int = 10, batch: int = 60,
              dtype: str = "fp32", accumulation: int = 1, with_grads: bool = True,
              name: str = "cnn") -> CNN:
    """Convolutions (each + bias + relu), then a linear classifier and cross-entropy.

    `batch` samples per optimizer step; with accumulation=k the graph's batch dim is
    batch // k and the loss is scaled by 1/batch (the mean over the whole batch).
    x is [W, H, C, micro_batch] in `dtype`, y int64 labels [micro_batch].
    """
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"build_cnn: dtype {dtype!r} is not a float dtype")
    if accumulation < 1 or batch < 1 or batch % accumulation:
        raise ValueError(f"build_cnn: batch {batch} must be a positive multiple of "
                         f"accumulation {accumulation}")
    micro = batch // accumulation
    graph = LogicalGraph(name)
    model = CNN(graph, tuple(image), tuple(layers), classes, batch, micro, accumulation, dtype)
    model.x = graph.tensor([*image, micro], "x", dtype=dtype, external=True)
    model.y = graph.tensor([micro], "y", dtype="int64", external=True)
    hidden = model.x
    for index, layer in enumerate(layers, start=1):
        hidden = conv_block(model, hidden, index, layer)
    features = list(hidden.shape[:3])
    weight = parameter(model, f"linear{len(layers) + 1}", [classes, *features])
    bias = parameter(model, f"linear{len(layers) + 1}_bias", [classes])
    product = ops.gemm(weight, hidden, "scores", ndim=3)               # (classes, micro)
    model.logits = ops.add_fiber(1.0, bias, 1.0, product, "logits", axis=0)
    model.loss = add_loss("cross_entropy", model.logits, model.y, "loss", alpha=1.0 / batch)
    model.loss.mark_output()
    if with_grads:
        model.grads = grad(graph, model.loss, model.params)
    return model


def conv_block(model, hidden, index, layer):
    """relu(conv2d(hidden, kernel) + bias): [W, H, C_in, N] -> [W', H', C_out, N]."""
    in_channels = hidden.shape[2]
    kernel = parameter(model, f"conv{index}",
                       [layer.kernel, layer.kernel, in_channels, layer.channels])
    if index % 2 == 1:   # tp: Megatron-style, this layer's output channels column-parallel,
        kernel.split_for_tp(3)   # the next layer's input channels row-parallel (partial sums)
    bias = parameter(model, f"conv{index}_bias", [layer.channels])
    out = ops.conv2d(hidden, kernel, f"conv{index}_out", padding=layer.padding,
                     stride=layer.stride)
    shifted = ops.add_fiber(1.0, bias, 1.0, out, f"conv{index}_biased", axis=2)
    return ops.relu(shifted, f"conv{index}_act")


def parameter(model, name, shape):
    tensor = model.graph.tensor(shape, name, dtype=model.dtype, requires_grad=True,
                                persistent=True)
    model.params.append(tensor)
    return tensor
