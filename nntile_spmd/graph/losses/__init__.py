"""Graph layer, losses family: cross-entropy with ignore_index over a split
vocabulary, the per-tile cross_entropy_loss, mse_loss. ops.py: builders; rules.py:
registry entries and gradients. The kernels' formulas: nntile_kernels/formulas/losses.py.
"""
