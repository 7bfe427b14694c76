"""Graph layer, linear algebra family: gemm and transpose with NNTile's multi-dim
layout rules. ops.py: builders; rules.py: registry entries and gradients.
"""
