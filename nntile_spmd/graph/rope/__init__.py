"""Graph layer, rope family: Llama's rotary position embeddings and scale_slice, the
broadcast that shares key/value heads among query-head groups. ops.py: builders;
rules.py: registry entries and gradients. The kernels' formulas:
nntile_kernels/formulas/rope.py.
"""
