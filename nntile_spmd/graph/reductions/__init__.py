"""Graph layer, reductions family: sums over the whole tensor, over fibers and over
slices along one axis, the broadcasts that undo them (add_fiber, add_slice, scale_fiber),
softmax, logsumexp, max/min/mean and norms. ops.py: builders; rules.py and
slice_rules.py: registry entries; backward.py: gradients. The kernels' formulas:
nntile_kernels/formulas/reductions.py.
"""
