"""Models layer: the walk between a transformers state dict and a model's tensors,
shared by GPT-2 and Llama.

A model states its weights' map as one table, [(HF name, [our tensor names of its
column blocks, in order], layout)], with LAYOUTS: layout -> (to_ours(hf_block, cfg),
to_hf(our_array, cfg)). load_hf_state_dict, hf_state_dict and hf_grads are the same
walk over that table in one direction or the other.
"""

from __future__ import annotations

import numpy as np

from ..graph.dtypes import storage_dtype

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
    of the state dict that are not weights), hf_table() and size_note()."""

    IGNORED_SUFFIXES = ()

    def load_hf_state_dict(self, cg, state_dict) -> None:
        """Bind a transformers model's state_dict() (tensors or arrays) to `cg`."""
        arrays = {name: as_numpy(value) for name, value in state_dict.items()}
        table = self.hf_table()
        expected = {hf for hf, _, _ in table}
        tied = self.config.tie_word_embeddings
        unknown = [name for name in arrays if name not in expected
                   and not (tied and name == HEAD) and not name.endswith(self.IGNORED_SUFFIXES)]
        missing = sorted(expected - set(arrays))
        if unknown or missing:
            raise KeyError(f"load_hf_state_dict: unexpected {unknown[:5]}, missing "
                           f"{missing[:5]} ({self.size_note()})")
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
