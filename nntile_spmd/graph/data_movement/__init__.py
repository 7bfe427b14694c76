"""Graph layer, data-movement family: slice, concat, reshape, gather, scatter,
embedding and log_scalar. ops.py: builders; rules.py: registry entries and gradients.
"""
