"""Models layer: text generation with a key/value cache (docs/design.md), for GPT-2 and
Llama. The one module of models/ that runs a graph: it compiles through the runtime
(as train/ does); the graph it compiles is built by the models' own builders.

The decode graph takes one token per sequence ([1, B]) and is planned once. Every
attention layer keeps persistent caches of its keys and values [E, L, B, heads] for
L = max_length positions; a step writes this token's key and value into slot p
(a gemm accumulating k ⊗ onehot(p), so the position is data bound per step, not a
shape) and attends over the cache with a bool mask keeping the keys <= p. A step
costs O(L) attention work and no recomputation of earlier positions. The prompt goes
through a prefill graph (the model's own forward over T0 positions, planned once per
prompt length) whose keys and values fill the first T0 slots of the caches.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..graph import LogicalGraph, ops
from ..graph.dtypes import storage_dtype
from ..runtime import compile as compile_graph
from .gpt2_builder import Builder
from .llama_builder import LlamaBuilder, rope_tables
from .pretrained import read_weights


class DecodeSteps:
    """What a decoder adds to its model's builder: one-token inputs, the caches, a head
    without loss. Mixed into GPT-2's and Llama's builders below."""

    def __init__(self, model, max_length: int):
        super().__init__(model)
        self.max_length = max_length
        self.slots = {}    # cache shape without its sequence dim -> onehot input [1, L, ...]
        self.caches = []   # the persistent key and value caches, cleared per generate()

    def decode_inputs(self):
        model, graph = self.model, self.graph
        model.input_ids = graph.tensor([1, model.batch], "input_ids", "int64", external=True)
        # True for the cache's keys at positions <= this step's: [key, query]
        self.mask = graph.tensor([self.max_length, 1], "key_mask", "bool", external=True)

    def remember(self, p, part, tensor):
        """Write this step's [E, 1, batch...] into its cache [E, L, batch...] at the slot
        the onehot `cache_slot` tensor names, and attend over the cache."""
        graph = self.graph
        shape = [tensor.shape[0], self.max_length, *tensor.shape[2:]]
        slot_shape = (1, *shape[1:])
        if slot_shape not in self.slots:   # one onehot per cache shape, bound per step
            self.slots[slot_shape] = graph.tensor(
                list(slot_shape), f"cache_slot{len(self.slots)}", tensor.dtype, external=True)
        cache = graph.tensor(shape, f"{p}_{part}_cache", tensor.dtype, persistent=True)
        self.caches.append(cache)
        # cache[E, L, batch...] += this step's [E, 1, batch...] x onehot [1, L, batch...]
        ops.gemm(tensor, self.slots[slot_shape], cache, 1.0, 1.0, False, False, 1,
                 len(shape) - 2)
        return cache

    def head(self, hidden):
        model = self.model
        normed = self.final_norm(hidden)
        if self.cfg.tie_word_embeddings:
            model.logits = ops.gemm(self.token_embedding, normed, "logits",
                                    trans_a=True).mark_output()
        else:
            head = self.param([self.cfg.vocab_size, self.cfg.hidden_size], "lm_head",
                              tp_dim=0)
            model.logits = ops.gemm(head, normed, "logits").mark_output()


class GPT2Decoder(DecodeSteps, Builder):
    """GPT-2's builder for one token a step: the position is an input, not a constant."""

    def embeddings(self):
        cfg, model, graph = self.cfg, self.model, self.graph
        self.decode_inputs()
        positions = graph.tensor([1, model.batch], "position_ids", "int64", external=True)
        self.wte = self.token_embedding = self.param([cfg.n_embd, cfg.vocab_size], "wte",
                                                     tp_dim=1)
        wpe = self.param([cfg.n_embd, cfg.n_positions], "wpe")
        tokens = ops.embedding(model.input_ids, self.wte, "token_embeddings", axis=0)
        places = ops.embedding(positions, wpe, "position_embeddings", axis=0)
        return ops.add(1.0, tokens, 1.0, places, "h_in")

    def final_norm(self, hidden):
        return self.layer_norm(hidden, "ln_f")

    def step_inputs(self, position) -> dict:
        batch = self.model.batch
        return {"position_ids": np.full((1, batch), position, dtype=np.int64, order="F")}


class LlamaDecoder(DecodeSteps, LlamaBuilder):
    """Llama's builder for one token a step: the rotary tables of this position are inputs."""

    def embeddings(self):
        cfg, model, graph = self.cfg, self.model, self.graph
        self.decode_inputs()
        half = [cfg.head_dim // 2, 1, model.batch]
        self.sin = graph.tensor(half, "rope_sin", self.dtype, external=True)
        self.cos = graph.tensor(half, "rope_cos", self.dtype, external=True)
        self.embed = self.token_embedding = self.param([cfg.hidden_size, cfg.vocab_size],
                                                       "embed_tokens", tp_dim=1)
        return ops.embedding(model.input_ids, self.embed, "h_in", axis=0)

    def final_norm(self, hidden):
        return self.rms_norm(hidden, "norm")

    def step_inputs(self, position) -> dict:
        sin, cos = rope_tables(self.cfg, self.model.batch, position + 1)
        dtype = storage_dtype(self.dtype)
        return {"rope_sin": np.asfortranarray(sin[:, -1:].astype(dtype)),
                "rope_cos": np.asfortranarray(cos[:, -1:].astype(dtype))}


class PrefillSteps:
    """The model's own forward over the prompt, its keys and values kept as outputs (in
    the order the decoder's caches are declared) to fill the caches."""

    def __init__(self, model):
        super().__init__(model)
        self.remembered = []

    def remember(self, p, part, tensor):
        self.remembered.append(tensor.mark_output())
        return tensor


class GPT2Prefill(PrefillSteps, Builder):
    """GPT-2's forward over the prompt, keeping keys and values."""


class LlamaPrefill(PrefillSteps, LlamaBuilder):
    """Llama's forward over the prompt, keeping keys and values."""


def sample(logits, do_sample, temperature, top_k, rng) -> np.ndarray:
    """Next tokens [B] from logits [V, B]: argmax, or a draw from softmax(logits / t)
    restricted to the top_k largest (transformers' order: temperature, then top-k)."""
    if not do_sample:
        return logits.argmax(axis=0)
    scaled = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < scaled.shape[0]:
        kth = np.sort(scaled, axis=0)[-top_k]
        scaled = np.where(scaled < kth, -np.inf, scaled)
    probs = np.exp(scaled - scaled.max(axis=0))
    probs /= probs.sum(axis=0)
    return np.array([rng.choice(len(column), p=column) for column in probs.T])


class Generator:
    """A decode graph with a key/value cache, compiled once for `batch` sequences of up to
    `max_length` tokens; weights from a local HF folder or an HF state dict. Collective:
    every rank builds it and calls generate() with the same arguments."""

    MODEL = None   # set per family: (model class, decoder builder, prefill builder)

    def __init__(self, cfg, path_or_state_dict, batch=1, max_length=None, dtype="fp32",
                 comm=None, distribution="single"):
        model_class, decoder_class, _ = self.MODEL
        cfg.check()
        limit = getattr(cfg, "n_positions", None) or cfg.max_position_embeddings
        max_length = limit if max_length is None else max_length
        if not 1 <= max_length <= limit or batch < 1:
            raise ValueError(f"Generator: need 1 <= max_length <= {limit} and batch >= 1, "
                             f"got max_length={max_length}, batch={batch}")
        if hasattr(cfg, "check_span"):   # a window the attention does not build (Mistral)
            cfg.check_span(max_length, "Generator: max_length")
        model = model_class(LogicalGraph(f"{type(self).__name__.lower()}_decode"), cfg,
                            batch, 1, dtype)
        self.builder = decoder_class(model, max_length)
        hidden = self.builder.embeddings()
        for layer in range(self.layers(cfg)):
            hidden = self.builder.block(layer, hidden)
        self.builder.head(hidden)
        self.model, self.batch, self.max_length = model, batch, max_length
        # plans from the process-wide cache (plan/cache.py, keyed by graph and request):
        # a second Generator of the same shapes, or one prompt length again, plans nothing
        self.compile_args = {"comm": comm, "distribution": distribution, "cache": True}
        self.cg = compile_graph(model.graph, **self.compile_args)
        weights = path_or_state_dict
        if isinstance(weights, (str, Path)):
            model.check_folder_config(weights)
            weights = read_weights(weights)
        model.load_hf_state_dict(self.cg, weights)
        self.weights = weights     # the prefill graphs of new prompt lengths bind them too
        self.prefills = {}         # prompt length -> (cg, its key and value tensors)

    @staticmethod
    def layers(cfg) -> int:
        return getattr(cfg, "n_layer", None) or cfg.num_hidden_layers

    def generate(self, prompt_ids, max_new_tokens, do_sample=False, temperature=1.0,
                 top_k=None, seed=0, eos_token_id=None, pad_token_id=None):
        """int64 [T0, B] -> int64 [T0 + N, B]: greedy, or sampled with a seeded generator
        (the same draws on every rank, so the ranks agree). N is max_new_tokens, or fewer
        when every sequence has produced `eos_token_id` (a finished one is padded with
        `pad_token_id`, default the EOS). Ragged prompts: a list of B 1-d prompts of any
        lengths gives a list of B 1-d arrays, each its prompt and its own up to
        max_new_tokens new tokens (up to its EOS): a sequence's prompt tokens are fed at
        their own positions while the shorter ones already generate, so each is what
        generating it alone gives."""
        ragged = isinstance(prompt_ids, (list, tuple))
        prompts = self.checked_prompts(prompt_ids, ragged)
        if do_sample and not temperature > 0:
            raise ValueError(f"generate: temperature={temperature} must be > 0")
        lengths = [len(prompt) for prompt in prompts]
        if max(lengths) + max_new_tokens > self.max_length:
            raise ValueError(f"generate: {max(lengths)} prompt + {max_new_tokens} new "
                             f"tokens exceed max_length={self.max_length}")
        out = [list(prompt) for prompt in prompts]
        if max_new_tokens >= 1:
            self.decode(prompts, out, max_new_tokens, (do_sample, temperature, top_k,
                                                       np.random.default_rng(seed)),
                        eos_token_id)
        if ragged:
            return [np.asarray(tokens, dtype=np.int64) for tokens in out]
        pad = eos_token_id if pad_token_id is None else pad_token_id
        result = np.full((max(map(len, out)), self.batch), -1 if pad is None else pad,
                         dtype=np.int64)
        for column, tokens in enumerate(out):
            result[:len(tokens), column] = tokens
        return result

    def checked_prompts(self, prompt_ids, ragged) -> list:
        """The B prompts as 1-d int64 arrays, checked."""
        if ragged:
            prompts = [np.asarray(prompt, dtype=np.int64) for prompt in prompt_ids]
            if len(prompts) != self.batch or any(p.ndim != 1 or len(p) < 1 for p in prompts):
                raise ValueError(f"generate: ragged prompt_ids must be {self.batch} 1-d "
                                 f"prompts of >= 1 token, got {len(prompts)} of lengths "
                                 f"{[list(np.shape(p)) for p in prompts]}")
            return prompts
        prompt = np.asarray(prompt_ids, dtype=np.int64)
        if prompt.ndim != 2 or prompt.shape[1] != self.batch or prompt.shape[0] < 1:
            raise ValueError(f"generate: prompt_ids must be int64 [T0 >= 1, batch="
                             f"{self.batch}] or a list of {self.batch} 1-d prompts, got "
                             f"shape {list(prompt.shape)}")
        return list(prompt.T)

    def decode(self, prompts, out, new_tokens, sampling, eos_token_id):
        """Append to each out[b] its new tokens: the shortest prompt's length goes through
        the prefill graph, then one decode step per position, each sequence fed its own
        prompt token while it has one, else the token drawn for it."""
        lengths = np.array([len(prompt) for prompt in prompts])
        start, stop = int(lengths.min()), int(lengths.max()) + new_tokens
        for tokens in out:
            del tokens[start:]
        finished = np.zeros(len(prompts), dtype=bool)
        logits = self.prefill(np.stack([prompt[:start] for prompt in prompts], axis=1))
        for position in range(start, stop):
            drawn = sample(logits, *sampling)
            fed = np.zeros(len(prompts), dtype=np.int64)
            for column, prompt in enumerate(prompts):
                if position < lengths[column]:
                    fed[column] = prompt[position]
                    out[column].append(prompt[position])
                elif position < lengths[column] + new_tokens and not finished[column]:
                    fed[column] = drawn[column]
                    out[column].append(int(drawn[column]))
                    finished[column] = drawn[column] == eos_token_id
            if all(finished | (position + 1 >= lengths + new_tokens)):
                return
            logits = self.step(fed, position)

    def prefill(self, prompt) -> np.ndarray:
        """Run the prompt [T0, B] through the model's forward in one execute, write its
        keys and values into the first T0 slots of the caches (the rest zero); the
        logits [V, B] of its last position."""
        cg, kept = self.prefill_graph(len(prompt))
        cg.bind_data("input_ids", np.asfortranarray(prompt))
        cg.bind_data("targets", np.asfortranarray(prompt))   # the loss is not read
        cg.execute()
        cg.wait()
        for cache, tensor in zip(self.builder.caches, kept):
            value = np.zeros(cache.shape, storage_dtype(cache.dtype), order="F")
            value[:, :len(prompt)] = cg.get_output(tensor.name)
            self.cg.bind_data(cache.name, value)
        return cg.get_output("logits")[:, -1, :]

    def prefill_graph(self, length):
        """(compiled forward over `length` positions, its key and value tensors), planned
        once per prompt length."""
        if length not in self.prefills:
            model_class, _, prefill_class = self.MODEL
            model = model_class(LogicalGraph(f"{type(self).__name__.lower()}_prefill"),
                                self.model.config, self.batch, length, self.model.dtype)
            builder = prefill_class(model)
            hidden = builder.embeddings()
            for layer in range(self.layers(model.config)):
                hidden = builder.block(layer, hidden)
            builder.head(hidden)
            cg = compile_graph(model.graph, **self.compile_args)
            model.load_hf_state_dict(cg, self.weights)
            self.prefills[length] = (cg, builder.remembered)
        return self.prefills[length]

    def step(self, token, position) -> np.ndarray:
        """Run the decode graph on tokens [B] at `position`; the logits [V, B]."""
        inputs = {"input_ids": np.asfortranarray(np.asarray(token, np.int64)[None, :]),
                  "key_mask": np.asfortranarray(
                      (np.arange(self.max_length) <= position)[:, None])}
        inputs |= self.builder.step_inputs(position)
        for shape, tensor in self.builder.slots.items():
            onehot = np.zeros(shape, storage_dtype(tensor.dtype), order="F")
            onehot[0, position] = 1.0
            inputs[tensor.name] = onehot
        for name, value in inputs.items():
            self.cg.bind_data(name, value)
        self.cg.execute()
        self.cg.wait()
        return self.cg.get_output("logits")[:, 0, :]
