"""The attention family's formulas: the masks of its scores (mask_scalar, mask_causal),
Indexed rules of rules_indexed.py's language (a formula that reads where its element is).
Flash attention's own kernels are cuda_attention.py's; its softmax pieces are
reductions.py's."""

from ..rules_indexed import Indexed

INDEXED = {
    # y = x where the mask (x's leading dims) holds, else val (y may be x: in place)
    "mask_scalar": Indexed(("mask", "x"), "y", ("where(mask, x, val)",), partners=("mask",),
                           params=("val",), booleans=("mask",), layout=(("batch_ndim", 0),)),
    # attention scores [keys, queries, batch...]: val where the key (dim 0) is past the
    # query (dim 1), counted from the tile's offsets in the whole matrix
    "mask_causal": Indexed(("x",), "y", ("x",),
                           cases=(("key + key_offset > query + query_offset", "val"),),
                           positions=(("key", 0), ("query", 1)), params=("val",),
                           offsets=("key_offset", "query_offset")),
}
