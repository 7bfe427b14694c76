"""Models layer: Llama (transformers' LlamaForCausalLM) as a LogicalGraph.

Layout follows the framework: column-major, dims inner to outer, batch trailing.
Activations are [hidden, T, B]. Query heads are split as (rep, kv_heads): HF's head h
is kv group h // rep, member h % rep, which is exactly the column-major flattening of
[rep, kv_heads], so grouped-query attention needs no reordering. Attention works on
[head_dim, T, B, rep, kv_heads]; keys and values [head_dim, T, B, kv_heads] are
broadcast over rep by scale_slice (HF's repeat_kv). With rep == 1 (plain multi-head
attention) the rep dim is left out, and with it the broadcast copies. Projection
weights are [out..., in...] (HEADS = rep, kv_heads; or kv_heads alone when rep == 1):

    q_weight     [HEADS, head_dim, hidden]           (q_proj)
    k_weight     [kv_heads, head_dim, hidden]        (k_proj; v_proj likewise)
    o_weight     [hidden, HEADS, head_dim]           (o_proj)
    gate_weight, up_weight [intermediate, hidden];  down_weight [hidden, intermediate]
    embed_tokens [hidden, vocab];  lm_head [vocab, hidden]

Rotary embeddings use NNTile's rope, which rotates the pairs (2i, 2i+1) of head_dim;
transformers rotates the pairs (i, i + head_dim/2) (rotate_half). Scores q.k are
unchanged by one permutation of head_dim applied to both q and k, so the rows of
q_proj and k_proj are permuted on load (evens <- first half, odds <- second half) and
back on export, as Meta's and HF's conversion scripts do between the two conventions:
the model computes exactly HF's attention. The sin/cos tables are constants
[head_dim/2, T, B] computed in float64 from rope_theta. The graph is built by
models/llama_builder.py.

TP marks: query/key/value heads by kv group (a group never straddles ranks), o_proj by
its input heads, the MLP inner dim, and the vocabulary. Builds ops through
nntile_spmd.graph only; imports no plan, runtime or MPI.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from ..graph import LogicalGraph, grad
from ..graph.dtypes import FLOAT_DTYPES, storage_dtype
from .gpt2 import GPT2
from .hf_weights import HEAD, same, transposed
from .config_rules import COUNT, OPTIONAL_COUNT, POSITIVE, check_fields
from .llama_builder import LlamaBuilder
from .pretrained import read_config
from . import generation


FIELD_RULES = {name: COUNT for name in (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings")}
FIELD_RULES |= {"rms_norm_eps": POSITIVE, "rope_theta": POSITIVE,
                "sliding_window": OPTIONAL_COUNT}
# the model types read as Llama, and the transformers class each one's folder names
ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM"}


@dataclass
class LlamaConfig:
    """transformers.LlamaConfig's field names and defaults (the ones the model reads).

    num_key_value_heads None means num_attention_heads (plain multi-head attention),
    head_dim None means hidden_size // num_attention_heads, as in transformers.
    """

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    attention_dropout: float = 0.0   # used by build_llama(..., dropout=True) only
    # Mistral is Llama whose attention sees only the last `sliding_window` positions; the
    # window is not built, so a Mistral model attends over at most that many (check_span)
    sliding_window: int | None = None
    model_type: str = "llama"        # or "mistral": the folder's, written back on save

    def __post_init__(self):
        check_fields(self, {"hidden_size": COUNT, "num_attention_heads": COUNT})  # divides
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads

    @property
    def rep(self) -> int:
        """Query heads per key/value head (HF's num_key_value_groups)."""
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def head_dims(self) -> list:
        """The query-head dims: [rep, kv_heads], or [kv_heads] without groups (rep == 1)."""
        return [self.rep, self.num_key_value_heads] if self.rep > 1 \
            else [self.num_key_value_heads]

    @classmethod
    def from_hf(cls, hf_config) -> LlamaConfig:
        """The fields of a transformers LlamaConfig or MistralConfig (rope_theta from its
        rope_parameters)."""
        values = {f.name: getattr(hf_config, f.name) for f in fields(cls)
                  if hasattr(hf_config, f.name)}
        rope = getattr(hf_config, "rope_parameters", None) or \
            getattr(hf_config, "rope_scaling", None) or {}   # older transformers' name
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise ValueError(f"LlamaConfig.from_hf: rope_type {rope_type!r} is not built "
                             "(only the default rotary embedding)")
        if "rope_theta" in rope:
            values["rope_theta"] = rope["rope_theta"]
        return cls(**values)

    @classmethod
    def from_pretrained(cls, path) -> LlamaConfig:
        """The config.json of a local HF model folder (model_type "llama" or "mistral");
        no download."""
        return cls.from_hf(read_config(path, tuple(ARCHITECTURES)))

    def to_hf_dict(self) -> dict:
        """config.json's content for transformers' LlamaForCausalLM (rope_theta both where
        transformers 5 reads it and where older versions do)."""
        values = asdict(self)
        if self.model_type == "llama":   # a Llama folder names no window
            values.pop("sliding_window")
        return values | {"architectures": [ARCHITECTURES[self.model_type]],
                         "rope_parameters": {"rope_theta": self.rope_theta,
                                             "rope_type": "default"}}

    def check_span(self, length: int, where: str) -> None:
        """Refuse attention over more than `sliding_window` positions: Mistral's window
        would hide the earliest of them, which this model (plain causal attention) sees."""
        if self.sliding_window is not None and length > self.sliding_window:
            raise ValueError(f"{where}: {length} positions exceed the config's sliding_window="
                             f"{self.sliding_window} ({self.model_type}); sliding-window "
                             "attention is not built, so at most that many are supported")

    def check(self):
        check_fields(self, FIELD_RULES)
        if self.model_type not in ARCHITECTURES:
            raise ValueError(f"LlamaConfig: model_type {self.model_type!r}, expected one of "
                             f"{sorted(ARCHITECTURES)}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"LlamaConfig: num_attention_heads={self.num_attention_heads} "
                             f"is not a multiple of num_key_value_heads="
                             f"{self.num_key_value_heads}")
        if self.head_dim % 2:
            raise ValueError(f"LlamaConfig: head_dim={self.head_dim} must be even (rope)")
        if self.hidden_act != "silu":
            raise ValueError(f"LlamaConfig: hidden_act {self.hidden_act!r}: only silu "
                             "(SwiGLU) is built")
        if self.attention_bias or self.mlp_bias:
            raise ValueError("LlamaConfig: attention_bias and mlp_bias are not built")


# -- HF layout table ---------------------------------------------------------------
def rope_permutation(head_dim) -> np.ndarray:
    """perm[our row] = HF row: our pair (2i, 2i+1) is HF's (i, i + head_dim/2)."""
    return np.arange(head_dim).reshape(2, head_dim // 2).T.reshape(-1)


def _q_ours(w, cfg):    # HF [heads*E, hidden] -> [HEADS, E, hidden]
    kv, rep, e = cfg.num_key_value_heads, cfg.rep, cfg.head_dim
    grouped = w.reshape(kv, rep, e, -1)[:, :, rope_permutation(e)].transpose(1, 0, 2, 3)
    return grouped.reshape(*cfg.head_dims, e, -1)


def _q_hf(a, cfg):
    grouped = a.reshape(cfg.rep, cfg.num_key_value_heads, cfg.head_dim, -1)
    inverse = np.argsort(rope_permutation(cfg.head_dim))
    return grouped.transpose(1, 0, 2, 3)[:, :, inverse].reshape(-1, a.shape[-1])


def _k_ours(w, cfg):    # HF [kv*E, hidden] -> [kv, E, hidden], rows permuted as q's
    e = cfg.head_dim
    return w.reshape(-1, e, w.shape[-1])[:, rope_permutation(e)]


def _k_hf(a, cfg):
    return a[:, np.argsort(rope_permutation(cfg.head_dim))].reshape(-1, a.shape[-1])


def _v_ours(w, cfg):    # HF [kv*E, hidden] -> [kv, E, hidden]
    return w.reshape(-1, cfg.head_dim, w.shape[-1])


def _v_hf(a, cfg):
    return a.reshape(-1, a.shape[-1])


def _o_ours(w, cfg):    # HF [hidden, heads*E] -> [hidden, HEADS, E]
    kv, rep, e = cfg.num_key_value_heads, cfg.rep, cfg.head_dim
    grouped = w.reshape(w.shape[0], kv, rep, e).transpose(0, 2, 1, 3)
    return grouped.reshape(w.shape[0], *cfg.head_dims, e)


def _o_hf(a, cfg):
    grouped = a.reshape(a.shape[0], cfg.rep, cfg.num_key_value_heads, cfg.head_dim)
    return grouped.transpose(0, 2, 1, 3).reshape(a.shape[0], -1)


LAYOUTS = {"q": (_q_ours, _q_hf), "k": (_k_ours, _k_hf), "v": (_v_ours, _v_hf),
           "o": (_o_ours, _o_hf), "transposed": (transposed, transposed),
           "same": (same, same)}

# (HF name, [our tensor name], layout): one tensor per HF parameter
GLOBAL_LAYOUT = [
    ("model.embed_tokens.weight", ["embed_tokens"], "transposed"),
    ("model.norm.weight", ["norm_weight"], "same"),
]
BLOCK_LAYOUT = [
    ("input_layernorm.weight", ["input_norm_weight"], "same"),
    ("self_attn.q_proj.weight", ["q_weight"], "q"),
    ("self_attn.k_proj.weight", ["k_weight"], "k"),
    ("self_attn.v_proj.weight", ["v_weight"], "v"),
    ("self_attn.o_proj.weight", ["o_weight"], "o"),
    ("post_attention_layernorm.weight", ["post_norm_weight"], "same"),
    ("mlp.gate_proj.weight", ["gate_weight"], "same"),
    ("mlp.up_proj.weight", ["up_weight"], "same"),
    ("mlp.down_proj.weight", ["down_weight"], "same"),
]
UNTIED_HEAD = (HEAD, ["lm_head"], "same")


def hf_layout(cfg):
    """[(HF name, [our tensor names], layout)] for every HF parameter."""
    table = list(GLOBAL_LAYOUT)
    for layer in range(cfg.num_hidden_layers):
        table += [(f"model.layers.{layer}.{hf}", [f"h{layer}_{ours}" for ours in names],
                   layout) for hf, names, layout in BLOCK_LAYOUT]
    return table if cfg.tie_word_embeddings else table + [UNTIED_HEAD]


# -- the model -------------------------------------------------------------------------
class Llama(GPT2):
    """A Llama graph (forward, mean cross-entropy loss, gradients) and its weights' map.

    The HF state-dict walk is GPT-2's (hf_weights.py); what differs is the table,
    the tied head's name and the initialization.
    """

    LAYOUTS = LAYOUTS
    EMBEDDING = "model.embed_tokens.weight"
    TIED_NOTE = "tie_word_embeddings is set"
    IGNORED_SUFFIXES = ()
    BASE_PREFIX = "model."   # a file saved from LlamaModel lacks it

    def hf_table(self) -> list:
        return hf_layout(self.config)

    def size_note(self) -> str:
        return (f"num_hidden_layers={self.config.num_hidden_layers}, "
                f"tie_word_embeddings={self.config.tie_word_embeddings}")

    def init_params(self, rng) -> dict:
        """Fresh weights as transformers initializes Llama, plus the constants.

        Linear and embedding weights ~ N(0, initializer_range); RMSNorm weights 1.
        """
        std = self.config.initializer_range
        dtype = storage_dtype(self.dtype)
        arrays = {}
        for tensor in self.params:
            value = np.ones(tensor.shape) if tensor.name.endswith("norm_weight") \
                else rng.normal(0.0, std, tensor.shape)
            arrays[tensor.name] = value.astype(dtype)
        return arrays | self.constants


def build_llama(cfg: LlamaConfig, batch: int, seq: int, dtype: str = "fp32",
                with_grads: bool = True, name: str = "llama",
                attention_mask: str = "causal", dropout: bool = False) -> Llama:
    """Llama on input_ids/targets int64 [seq, batch]: logits [V, seq, batch] and loss.

    The loss is the mean cross-entropy over the positions whose target is not -100
    (targets are the next tokens, already shifted). With `with_grads`, the graph
    also computes d loss / d parameter for every parameter (model.grads).
    `attention_mask`: "causal" or "tensor", as in build_gpt2. `dropout`: the config's
    attention_dropout on the attention probabilities, in training steps only (build_gpt2).
    """
    cfg.check()
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"build_llama: dtype {dtype!r} is not a float dtype")
    if not 1 <= seq <= cfg.max_position_embeddings or batch < 1:
        raise ValueError(f"build_llama: need 1 <= seq <= max_position_embeddings="
                         f"{cfg.max_position_embeddings} and batch >= 1, got seq={seq}, "
                         f"batch={batch}")
    cfg.check_span(seq, "build_llama: seq")
    model = Llama(LogicalGraph(name), cfg, batch, seq, dtype, dropout=dropout)
    builder = LlamaBuilder(model, attention_mask)
    hidden = builder.embeddings()
    for layer in range(cfg.num_hidden_layers):
        hidden = builder.block(layer, hidden)
    builder.head(hidden)
    if with_grads:
        model.grads = grad(model.graph, model.loss, model.params)
    return model


class Generator(generation.Generator):
    """Llama's decode graph with a key/value cache (models/generation.py):
    Generator(cfg, path_or_state_dict, batch, max_length, dtype, comm, distribution)
    .generate(prompt_ids [T0, B], max_new_tokens, do_sample, temperature, top_k, seed)."""

    MODEL = (Llama, generation.LlamaDecoder, generation.LlamaPrefill)
