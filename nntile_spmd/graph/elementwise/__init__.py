"""Graph layer, elementwise family: unary activations (gelu, relu, silu, sqrt, tanh,
sigmoid, ...), add/multiply/scale, sub, div, hypot, pow, and the utility writes (clear,
fill, add_scalar, copy, cast). ops.py: builders; rules.py: registry entries;
backward.py: gradients. The kernels' formulas: nntile_kernels/formulas/elementwise.py.
"""
