"""Graph layer, attention family: the masks (mask_scalar, mask_causal) and the
scaled dot-product attention composites (online softmax over key tiles, NNTile's flash
names). ops.py: builders; rules.py: the masks' entries and gradients. The masks'
kernel formulas: nntile_kernels/formulas/attention.py.
"""
