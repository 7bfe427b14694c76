"""An indexed rule (formulas/: the masks, rope) compiled for a GPU: one kernel per
float dtype over the tiles in memory order (rules_cuda_indexed.py writes its C++),
16-bit tiles through the fp32 kernel, dispatched as compiled_broadcast.py's entries are.

Unpaired (mask_scalar, mask_causal), the kernel's elementwise operands are the full
tiles and its positions' sizes n0, n1, ... the output's leading dims; a partner (the
bool mask) is raw, read at i % lead, so it must be the tile's leading dims. Paired
(rope, rope_backward), every array is raw and the kernel runs over the pairs of
adjacent elements (its size given at the launch), the tables of pairs [head_dim/2,
rest...] read at pair % lead. Tiles the index arithmetic does not describe (not
Fortran-contiguous, mixed or integer dtypes, a partner not of the tile's leading dims,
an odd head_dim) take the generic kernel (`fallback`). Arrays only, and no CuPy.

A loss's class tile (LOSSES; FROM_LSE's step, which cuda.py puts after the table's
logsumexp with rules_indexed.AfterLogsumexp) is CompiledLoss: logits and output of
one shape, columns (lse, int64 labels) of its dims after the class axis, 0-d scalars;
its labels checked as the array expressions check them (ArrayIndexed.run_checks, one
host sync) before the one launch.
"""

from .compiled_broadcast import CompiledInMemoryOrder
from .rules_cuda_indexed import id_arrays, integer_keywords
from .rules_indexed import ArrayIndexed, given_keywords, indexed_signature


class CompiledIndexed(CompiledInMemoryOrder):
    """The kernel table entry of one Indexed rule of INDEXED."""

    signature = staticmethod(indexed_signature)

    def scalars(self, keywords):
        """The params (float64), then the offsets (int64): the kernel's order."""
        params, offsets = given_keywords(self.__name__, self.rule, keywords)
        return [*(float(params[name]) for name in self.rule.params),
                *(int(offsets[name]) for name in self.rule.offsets)]

    def launch_options(self, out):
        """Paired, every array is raw: CuPy needs the launch's size, one per pair."""
        return {"size": out.size // 2} if self.rule.paired else {}

    def plan(self, arrays, keywords):
        """(sizes, keywords) where the kernel takes these arrays as they are, else None."""
        indexed = self.rule
        names = (*indexed.inputs, indexed.output)
        if not self.tiles_fit(arrays, names, indexed.booleans):
            return None
        out = arrays[-1]
        tiles = [a for name, a in zip(names, arrays) if name not in indexed.partners]
        partners = [a for name, a in zip(names, arrays) if name in indexed.partners]
        if any(tile.shape != out.shape for tile in tiles) or out.ndim < len(indexed.positions):
            return None
        if partners and not _partners_fit(partners, out.shape, indexed.paired):
            return None
        if indexed.positions:
            sizes = tuple(out.shape[axis] for _, axis in indexed.positions)
        else:
            sizes = (partners[0].size,) if partners else ()
        return sizes, keywords


class CompiledLoss(CompiledInMemoryOrder):
    """The kernel table entry of a loss's class-tile rule (LOSSES, FROM_LSE)."""

    signature = staticmethod(indexed_signature)

    def __init__(self, name, rule, fallback, compile_kernel, xp, dispatch=True):
        super().__init__(name, rule, fallback, compile_kernel, xp, dispatch)
        # the array expressions' own checks: the text of the rule's Check, on xp arrays
        self._checked = ArrayIndexed(name, rule, {"__xp__": xp})

    def scalars(self, keywords):
        """The params (float64), then integer_keywords (int64): the kernel's order."""
        params, integers = given_keywords(self.__name__, self.rule, keywords)
        return [*(float(params[name]) for name in self.rule.params),
                *(integers[name] for name in integer_keywords(self.rule))]

    def check(self, arrays, keywords):
        params, integers = given_keywords(self.__name__, self.rule, keywords)
        self._checked.run_checks(arrays[:-1], {**params, **integers})

    def plan(self, arrays, keywords):
        """(sizes, keywords) where the kernel takes these arrays as they are, else None."""
        indexed = self.rule
        names = (*indexed.inputs, indexed.output)
        if not self.tiles_fit(arrays, names, ids=id_arrays(indexed)):
            return None
        shape, lead = arrays[-1].shape, len(indexed.positions)
        expected = {**{name: shape[lead:] for name in indexed.columns},
                    **{name: () for name in indexed.scalars}}
        if len(shape) < lead or any(array.shape != expected.get(name, shape)
                                    for name, array in zip(names, arrays)):
            return None
        return shape[:lead], keywords


def _partners_fit(partners, shape, paired):
    """Are the partners of one shape, the leading dims of a tile of `shape` (paired: dim 0
    halved, the pairs along it)?"""
    lead = partners[0].shape
    if any(partner.shape != lead for partner in partners) or len(lead) > len(shape):
        return False
    if paired:
        return (len(lead) > 0 and shape[0] == 2 * lead[0]
                and shape[1:len(lead)] == lead[1:])
    return shape[:len(lead)] == lead
