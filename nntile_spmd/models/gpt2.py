"""Models layer: GPT-2 (transformers' GPT2LMHeadModel) as a LogicalGraph.

Layout follows the framework: column-major, dims inner to outer, batch trailing.
Activations are [n_embd, T, B]; attention works on [head_dim, T, B, heads] so that
(B, heads) are the trailing batch dims of its batched gemms; the vocabulary is the
leading axis of the logits [V, T, B]. HF's Conv1D weights are [in, out]; here every
projection is a gemm whose weight is laid out [out..., in...]:

    q_weight, k_weight, v_weight  [heads, head_dim, n_embd]   (c_attn split in three)
    q_bias, k_bias, v_bias        [head_dim, heads]
    attn_proj_weight              [n_embd, heads, head_dim]    (attn.c_proj)
    fc_weight                     [n_inner, n_embd]            (mlp.c_fc)
    proj_weight                   [n_embd, n_inner]            (mlp.c_proj)

The conversion to and from HF's names and shapes is one table (hf_layout over
BLOCK_LAYOUT), so load_hf_state_dict / hf_state_dict / hf_grads are the same walk over
it (models/hf_weights.py, shared with Llama); the graph is built by
models/gpt2_builder.py. Tensor
parallelism is marked on the weights (heads, MLP inner dim, vocabulary): the "tp"
preset then splits attention by heads, c_fc by columns and c_proj by rows, and
the embedding, the tied lm_head and the loss over the vocabulary (Megatron's layout).
Builds ops through nntile_spmd.graph only; imports no plan, runtime or MPI.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

from ..graph import LogicalGraph, grad
from ..graph.dtypes import FLOAT_DTYPES, storage_dtype
from ..graph.recompute import recompute as recompute_segments
from .config_rules import COUNT, OPTIONAL_COUNT, POSITIVE, check_fields
from .gpt2_builder import ACTIVATIONS, Builder
from .hf_weights import HFWeights, same, transposed
from .pretrained import read_config
from . import generation


FIELD_RULES = {"vocab_size": COUNT, "n_positions": COUNT, "n_embd": COUNT, "n_layer": COUNT,
               "n_head": COUNT, "n_inner": OPTIONAL_COUNT, "layer_norm_epsilon": POSITIVE}


@dataclass
class GPT2Config:
    """transformers.GPT2Config's field names and defaults (the ones the model reads).

    The dropout probabilities are used by build_gpt2(..., dropout=True) only: without it
    the graph has no dropout (parity with transformers' eval mode, generation).
    """

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None
    activation_function: str = "gelu_new"
    resid_pdrop: float = 0.1
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    reorder_and_upcast_attn: bool = False
    tie_word_embeddings: bool = True

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def inner(self) -> int:
        return self.n_inner if self.n_inner is not None else 4 * self.n_embd

    @classmethod
    def from_hf(cls, hf_config) -> GPT2Config:
        """The fields of a transformers GPT2Config (or any object with those attributes)."""
        return cls(**{f.name: getattr(hf_config, f.name) for f in fields(cls)
                      if hasattr(hf_config, f.name)})

    @classmethod
    def from_pretrained(cls, path) -> GPT2Config:
        """The config.json of a local HF model folder (model_type "gpt2"); no download."""
        return cls.from_hf(read_config(path, "gpt2"))

    def to_hf_dict(self) -> dict:
        """config.json's content for transformers' GPT2LMHeadModel."""
        return asdict(self) | {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}

    def check(self):
        check_fields(self, FIELD_RULES)
        if self.n_embd % self.n_head:
            raise ValueError(f"GPT2Config: n_embd={self.n_embd} is not a multiple of "
                             f"n_head={self.n_head}")
        if self.activation_function not in ACTIVATIONS:
            raise ValueError(f"GPT2Config: activation_function {self.activation_function!r} "
                             f"is not one of {sorted(ACTIVATIONS)}")
        if not self.tie_word_embeddings:
            raise ValueError("GPT2Config: only tied word embeddings are built (HF's default)")
        if self.scale_attn_by_inverse_layer_idx or self.reorder_and_upcast_attn:
            raise ValueError("GPT2Config: scale_attn_by_inverse_layer_idx and "
                             "reorder_and_upcast_attn are not built")


# -- HF layout table ---------------------------------------------------------------
# Each entry converts one of our tensors to the HF array it comes from (or a column
# block of it): to_ours(hf_block, cfg) -> our array, to_hf(our_array, cfg) -> block.
def _qkv_weight_ours(block, cfg):   # HF [n_embd, heads*head_dim] -> [heads, head_dim, n_embd]
    return block.T.reshape(cfg.n_head, cfg.head_dim, cfg.n_embd)


def _qkv_weight_hf(array, cfg):
    return array.reshape(cfg.n_embd, cfg.n_embd).T


def _qkv_bias_ours(block, cfg):     # HF [heads*head_dim] -> [head_dim, heads]
    return block.reshape(cfg.n_head, cfg.head_dim).T


def _qkv_bias_hf(array, cfg):
    return array.T.reshape(-1)


def _attn_proj_ours(block, cfg):    # HF [heads*head_dim, n_embd] -> [n_embd, heads, head_dim]
    return block.T.reshape(cfg.n_embd, cfg.n_head, cfg.head_dim)


def _attn_proj_hf(array, cfg):
    return array.reshape(cfg.n_embd, cfg.n_embd).T


LAYOUTS = {"qkv_weight": (_qkv_weight_ours, _qkv_weight_hf),
           "qkv_bias": (_qkv_bias_ours, _qkv_bias_hf),
           "attn_proj": (_attn_proj_ours, _attn_proj_hf),
           "transposed": (transposed, transposed),
           "same": (same, same)}

# (HF name, [our names of its column blocks, in order], layout)
GLOBAL_LAYOUT = [
    ("transformer.wte.weight", ["wte"], "transposed"),
    ("transformer.wpe.weight", ["wpe"], "transposed"),
    ("transformer.ln_f.weight", ["ln_f_weight"], "same"),
    ("transformer.ln_f.bias", ["ln_f_bias"], "same"),
]
BLOCK_LAYOUT = [
    ("ln_1.weight", ["ln_1_weight"], "same"),
    ("ln_1.bias", ["ln_1_bias"], "same"),
    ("attn.c_attn.weight", ["q_weight", "k_weight", "v_weight"], "qkv_weight"),
    ("attn.c_attn.bias", ["q_bias", "k_bias", "v_bias"], "qkv_bias"),
    ("attn.c_proj.weight", ["attn_proj_weight"], "attn_proj"),
    ("attn.c_proj.bias", ["attn_proj_bias"], "same"),
    ("ln_2.weight", ["ln_2_weight"], "same"),
    ("ln_2.bias", ["ln_2_bias"], "same"),
    ("mlp.c_fc.weight", ["fc_weight"], "transposed"),
    ("mlp.c_fc.bias", ["fc_bias"], "same"),
    ("mlp.c_proj.weight", ["proj_weight"], "transposed"),
    ("mlp.c_proj.bias", ["proj_bias"], "same"),
]


def hf_layout(cfg):
    """[(HF name, [our tensor names], layout)] for every HF parameter."""
    table = list(GLOBAL_LAYOUT)
    for layer in range(cfg.n_layer):
        table += [(f"transformer.h.{layer}.{hf}", [f"h{layer}_{ours}" for ours in names],
                   layout) for hf, names, layout in BLOCK_LAYOUT]
    return table


# -- the model -------------------------------------------------------------------------
@dataclass
class GPT2(HFWeights):
    """A GPT-2 graph (forward, mean cross-entropy loss and gradients) and its weights' map."""

    # the HF walk (hf_weights.py) over this model's table
    LAYOUTS = LAYOUTS
    EMBEDDING = "transformer.wte.weight"   # lm_head.weight is the same tensor
    TIED_NOTE = "GPT-2's head is tied"
    # Buffers some transformers versions keep in the state dict (the causal mask).
    IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")
    BASE_PREFIX = "transformer."   # the Hub's gpt2 file was saved from GPT2Model

    graph: LogicalGraph
    config: GPT2Config
    batch: int
    seq: int
    dtype: str
    compute_dtype: str | None = None   # mixed precision: forward/backward dtype (bf16)
    input_ids: object = None
    targets: object = None
    logits: object = None
    loss: object = None
    params: list = field(default_factory=list)
    grads: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)   # name -> ndarray the graph needs bound
    dropout: bool = False   # the config's dropout in the graph, on in training steps only

    @property
    def param_names(self) -> list:
        return [p.name for p in self.params]

    # What train.Trainer binds per step: the named inputs, one micro-batch per step.
    @property
    def inputs(self) -> tuple:
        """Names of the tensors bound per step: ("input_ids", "targets")."""
        return (self.input_ids.name, self.targets.name)

    @property
    def micro_batch(self) -> int:
        return self.batch

    accumulation = 1   # the mean loss over a micro-batch is the step's loss

    # -- weights in our layout ------------------------------------------------------
    def init_params(self, rng) -> dict:
        """Fresh weights as GPT-2 initializes them, plus the constants: {name: ndarray}.

        Linear and embedding weights ~ N(0, initializer_range); the residual output
        projections (attn.c_proj, mlp.c_proj) ~ N(0, initializer_range/sqrt(2 n_layer));
        biases 0; LayerNorm weight 1, bias 0.
        """
        std = self.config.initializer_range
        residual_std = std / np.sqrt(2 * self.config.n_layer)
        dtype = storage_dtype(self.dtype)
        arrays = {}
        for tensor in self.params:
            kind = tensor.name.split("_", 1)[-1] if tensor.name.startswith("h") \
                and "_" in tensor.name else tensor.name
            if kind.endswith("bias"):
                value = np.zeros(tensor.shape)
            elif kind.startswith("ln"):
                value = np.ones(tensor.shape)
            elif kind in ("attn_proj_weight", "proj_weight"):
                value = rng.normal(0.0, residual_std, tensor.shape)
            else:
                value = rng.normal(0.0, std, tensor.shape)
            arrays[tensor.name] = value.astype(dtype)
        return arrays | self.constants

    # -- the HF weights' map (load_hf_state_dict, hf_state_dict, hf_grads: HFWeights) --
    def hf_table(self) -> list:
        return hf_layout(self.config)

    def size_note(self) -> str:
        return f"n_layer={self.config.n_layer}"


def build_gpt2(cfg: GPT2Config, batch: int, seq: int, dtype: str = "fp32",
               with_grads: bool = True, name: str = "gpt2", recompute=False,
               compute_dtype: str | None = None, attention_mask: str = "causal",
               dropout: bool = False) -> GPT2:
    """GPT-2 on input_ids/targets int64 [seq, batch]: logits [V, seq, batch] and loss.

    The loss is the mean cross-entropy over the positions whose target is not -100
    (targets are the next tokens, already shifted). With `with_grads`, the graph
    also computes d loss / d parameter for every parameter (model.grads).
    `recompute`: True (every transformer block) or a list of block indices whose
    activations backward recomputes from the block's input (graph.recompute).
    Mixed precision: with `compute_dtype` (e.g. "bf16") the parameters, their
    gradients and the optimizer state stay in `dtype` (the master weights); the
    attention and MLP of every block run in `compute_dtype` on casts of their weights
    and of the normalized input, while the residual stream, the layer norms, the
    embeddings and the loss stay in `dtype` (docs/precision.md).
    `attention_mask`: "causal" skips the attention blocks above the diagonal (known when
    planning); "tensor" computes them and masks with a bool constant (bitwise the same).
    `dropout`: the config's embd_pdrop, attn_pdrop and resid_pdrop as transformers applies
    them, in training steps only (train.Trainer switches the runtime scalar "dropout" on
    for its executes; every other execute runs without it). The masks come from a counter-
    based generator keyed by site and step: the same on every tiling and rank count.
    """
    cfg.check()
    for what, value in (("dtype", dtype), ("compute_dtype", compute_dtype or dtype)):
        if value not in FLOAT_DTYPES:
            raise TypeError(f"build_gpt2: {what} {value!r} is not a float dtype")
    if not 1 <= seq <= cfg.n_positions or batch < 1:
        raise ValueError(f"build_gpt2: need 1 <= seq <= n_positions={cfg.n_positions} and "
                         f"batch >= 1, got seq={seq}, batch={batch}")
    graph = LogicalGraph(name)
    model = GPT2(graph, cfg, batch, seq, dtype, compute_dtype, dropout=dropout)
    builder = Builder(model, attention_mask)
    hidden = builder.embeddings()
    for layer in range(cfg.n_layer):
        hidden = builder.block(layer, hidden)
    builder.head(hidden)
    if with_grads:
        model.grads = grad(graph, model.loss, model.params)
    if recompute:
        blocks = range(cfg.n_layer) if recompute is True else recompute
        if not with_grads or any(not 0 <= b < cfg.n_layer for b in blocks):
            raise ValueError(f"build_gpt2: recompute={recompute!r} needs with_grads and "
                             f"block indices in [0, {cfg.n_layer})")
        recompute_segments(graph, [f"h{block}_" for block in blocks])
    return model


class Generator(generation.Generator):
    """GPT2's decode graph with a key/value cache (models/generation.py):
    Generator(cfg, path_or_state_dict, batch, max_length, dtype, comm, distribution)
    .generate(prompt_ids [T0, B], max_new_tokens, do_sample, temperature, top_k, seed)."""

    MODEL = (GPT2, generation.GPT2Decoder, generation.GPT2Prefill)
