"""Simulator: the models a calibration measures and a prediction is checked on.

Each workload is a training step (forward, backward, AdamW) of a model from
nntile_spmd.models, with random inputs of the right kind bound by `bind_batch`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..models import gpt2, mlp
from ..models.optimizer import add_optimizer


@dataclass
class Workload:
    name: str
    graph: object
    params: dict            # name -> initial value
    inputs: dict            # name -> (shape, dtype, high): integers below `high`, or normal

    def bind_batch(self, cg, rng) -> None:
        for name, (shape, dtype, high) in self.inputs.items():
            value = (rng.integers(0, high, shape) if high else rng.standard_normal(shape))
            cg.bind_data(name, value.astype(dtype))

    def bind_params(self, cg) -> None:
        for name, value in self.params.items():
            cg.bind_data(name, value)


def mlp_workload(sizes=(784, 1024, 1024, 10), batch=256, dtype="fp32") -> Workload:
    """The MLP of the performance comparisons (784-1024-1024-10, batch 256)."""
    model = mlp.build_mlp(sizes, batch, dtype)
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-3)
    np_dtype = "float32" if dtype == "fp32" else "float64"
    inputs = {"x": ((sizes[0], batch), np_dtype, 0), "y": ((batch,), "int64", sizes[-1])}
    return Workload("mlp", model.graph, model.init_params(np.random.default_rng(0)), inputs)


def gpt2_workload(n_layer=2, n_embd=128, n_head=4, batch=4, seq=64, vocab=256,
                  dtype="fp32") -> Workload:
    """A small byte-level GPT-2 training step."""
    config = gpt2.GPT2Config(vocab_size=vocab, n_positions=seq, n_embd=n_embd,
                             n_layer=n_layer, n_head=n_head)
    model = gpt2.build_gpt2(config, batch=batch, seq=seq, dtype=dtype)
    add_optimizer(model.graph, model.params, model.grads, "adamw", lr=1e-3)
    inputs = {"input_ids": ((seq, batch), "int64", vocab),
              "targets": ((seq, batch), "int64", vocab)}
    return Workload("gpt2", model.graph, model.init_params(np.random.default_rng(0)), inputs)


WORKLOADS = {"mlp": mlp_workload, "gpt2": gpt2_workload}
