"""Graph layer, convolution family: NNTile's 2-D convolutions (forward, and the
backward ones by input and by weight) and copy_intersection. ops.py: builders and the
output-shape rule; rules.py: registry entries and gradients.
"""
