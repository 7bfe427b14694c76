"""Models layer: the walk between a transformers state dict and a model's tensors,
shared by GPT-2 and Llama.

A model states its weights' map as one table, [(HF name, [our tensor names of its
column blocks, in order], layout)], with LAYOUTS: layout -> (to_ours(hf_block, cfg),
to_hf(our_array, cfg)). load_hf_state_dict, hf_state_dict and hf_grads are the same
walk over that table in one direction or the other. load_pretrained / save_pretrained
read and write a local Hugging Face model folder (pretrained.py) through the same walk.
"""

from __future__ import annotations

import numpy as np

from ..graph.dtypes import storage_dtype
from .config_rules import fields_that_differ
from .pretrained import hf_dtype_name, read_weights, save_on_rank_zero

HEAD = "lm_head.weight"   # the output head; with tied embeddings the same array as EMBEDDING


def as_numpy(value):
    if hasattr(value, "detach"):   # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def transposed(block, cfg):
    return block.T


def same(block, cfg):
    return block


class HFWeights:
    """State-dict conversion of a model dataclass (graph, config, dtype, params, grads,
    constants). The model class sets LAYOUTS, EMBEDDING (the HF name a tied head
    equals), TIED_NOTE (why they must be equal, for the error), IGNORED_SUFFIXES (buffers
    of the state dict that are not weights), BASE_PREFIX (what the LM-head model adds to
    the base model's names: a Hub file saved from the base model lacks it), hf_table()
    and size_note()."""

    IGNORED_SUFFIXES = ()
    BASE_PREFIX = ""

    def load_pretrained(self, cg, path) -> None:
        """Bind the weights of a local HF model folder (model.safetensors or the sharded
        index; Hub key names with or without the base model's prefix) to `cg`; collective
        only in that every rank reads the files itself."""
        self.check_folder_config(path)
        self.load_hf_state_dict(cg, read_weights(path))

    def check_folder_config(self, path) -> None:
        """Refuse a folder whose config.json builds another model than this one (the fields
        that do not change the computation aside: config_rules.FIELDS_LOADING_IGNORES)."""
        differ = fields_that_differ(self.config, type(self.config).from_pretrained(path))
        if differ:
            raise ValueError(f"load_pretrained({path}): the folder's config differs from the "
                             f"model's in {differ} (build the model from "
                             f"{type(self.config).__name__}.from_pretrained(path))")

    def save_pretrained(self, cg, path):
        """Write config.json + model.safetensors that transformers' from_pretrained loads
        unchanged (collective: every rank gathers the weights, rank 0 writes, atomically)."""
        arrays = self.hf_state_dict(cg)
        if self.config.tie_word_embeddings:   # transformers ties it again on load
            arrays.pop(HEAD, None)
        config = self.config.to_hf_dict() | {"dtype": hf_dtype_name(arrays)}
        return save_on_rank_zero(cg, path, config, arrays)

    def hub_names(self, arrays: dict, expected: set) -> dict:
        """Add the base model's prefix to names saved without it (the Hub's gpt2 file says
        'h.0.attn.c_attn.bias' for 'transformer.h.0.attn.c_attn.bias')."""
        return {self.BASE_PREFIX + name if name not in expected
                and self.BASE_PREFIX + name in expected else name: value
                for name, value in arrays.items()}

    def load_hf_state_dict(self, cg, state_dict) -> None:
        """Bind a transformers model's state_dict() (tensors or arrays) to `cg`."""
        table = self.hf_table()
        expected = {hf for hf, _, _ in table}
        arrays = self.hub_names({name: as_numpy(value) for name, value in state_dict.items()},
                                expected)
        tied = self.config.tie_word_embeddings
        unknown = [name for name in arrays if name not in expected
                   and not (tied and name == HEAD) and not name.endswith(self.IGNORED_SUFFIXES)]
        missing = sorted(expected - set(arrays))
        if unknown or missing:
            raise KeyError(f"load_hf_state_dict: unexpected {unknown[:5]}, missing "
                           f"{missing[:5]} ({self.size_note()}; {len(unknown)} unexpected, "
                           f"{len(missing)} missing)")
        if tied and HEAD in arrays and not np.array_equal(arrays[HEAD], arrays[self.EMBEDDING]):
            raise ValueError(f"load_hf_state_dict: {HEAD} differs from {self.EMBEDDING}, "
                             f"but {self.TIED_NOTE}")
        dtype = storage_dtype(self.dtype)
        for hf_name, ours, layout in table:
            to_ours = self.LAYOUTS[layout][0]
            for name, block in zip(ours, np.split(arrays[hf_name], len(ours), axis=-1)):
                value = to_ours(block, self.config)
                expected_shape = self.graph.get_tensor(name).shape
                if value.shape != expected_shape:
                    raise ValueError(f"load_hf_state_dict: {hf_name} gives {name} shape "
                                     f"{list(value.shape)}, expected {list(expected_shape)}")
                cg.bind_data(name, np.asarray(value, dtype=dtype))
        for name, value in self.constants.items():
            cg.bind_data(name, value)

    def hf_state_dict(self, cg) -> dict:
        """{HF name: current weight as an ndarray in HF's shape} (a tied head included)."""
        result = self._to_hf(lambda name: cg.get_output(name))
        if self.config.tie_word_embeddings:
            result[HEAD] = result[self.EMBEDDING]
        return result

    def hf_grads(self, cg) -> dict:
        """{HF parameter name: d loss / d parameter in HF's shape} (a tied head's is the
        embedding's)."""
        grad_of = {g.grad_of: g.name for g in self.grads}
        return self._to_hf(lambda name: cg.get_output(grad_of[name]))

    def _to_hf(self, fetch) -> dict:
        result = {}
        for hf_name, ours, layout in self.hf_table():
            to_hf = self.LAYOUTS[layout][1]
            blocks = [to_hf(np.asarray(fetch(name)), self.config) for name in ours]
            result[hf_name] = np.ascontiguousarray(
                blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=-1))
        return result
