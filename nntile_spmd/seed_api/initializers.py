"""Seed API: parameter initialisers (ExecutableGraph.init_parameters) filled where the
tiles live.

Each rank draws only the tiles it holds, from the counter-based generators of
nntile_kernels.generic_random (randn's normal, uniform): element i of a parameter (its
F-order index in the whole tensor) gets number i of a stream keyed by the parameter's
name and the seed, so the values are the same on any rank count and any tiling, and no
rank ever holds more than one tile of a parameter it does not own.

Fans follow the seed's matmul (x @ W contracts x's last dim with W's first): a weight
[in, out...] has fan_in = in and fan_out = the product of the other dims; a vector [n]
has fan_in = fan_out = n.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from nntile_kernels.generic_random import randn, uniform


def fans(shape) -> tuple:
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    return shape[0], math.prod(shape[1:])


# initializer -> (fan_in, fan_out) -> (distribution, its two parameters): constant
# (value, unused), normal (mean, std), uniform (low, high); torch.nn.init's formulas,
# kaiming's gain sqrt(2) (ReLU), fan_in mode
INITIALIZERS = {
    "zeros": lambda fan_in, fan_out: ("constant", 0.0, 0.0),
    "ones": lambda fan_in, fan_out: ("constant", 1.0, 0.0),
    "normal": lambda fan_in, fan_out: ("normal", 0.0, 1.0),
    "uniform": lambda fan_in, fan_out: ("uniform", 0.0, 1.0),
    "xavier_uniform": lambda fan_in, fan_out: symmetric(math.sqrt(6.0 / (fan_in + fan_out))),
    "xavier_normal": lambda fan_in, fan_out: ("normal", 0.0, math.sqrt(2.0 / (fan_in + fan_out))),
    "kaiming_uniform": lambda fan_in, fan_out: symmetric(math.sqrt(6.0 / fan_in)),
    "kaiming_normal": lambda fan_in, fan_out: ("normal", 0.0, math.sqrt(2.0 / fan_in)),
}


def symmetric(bound):
    return ("uniform", -bound, bound)


def check_initializer(name, initializer) -> str:
    if initializer not in INITIALIZERS:
        raise ValueError(f"init_parameters: {initializer!r} for {name} is not one of "
                         f"{sorted(INITIALIZERS)}")
    return initializer


def stream_seed(name: str, seed: int) -> int:
    """The generator key of parameter `name`: its name's CRC and the user's seed."""
    return (int(seed) << 32) + zlib.crc32(name.encode())


def draw_tile(initializer, name, shape, tile_shape, offset, seed) -> np.ndarray:
    """The float64 values of the tile of parameter `name` [shape] at `offset`."""
    kind, first, second = INITIALIZERS[initializer](*fans(shape))
    tile = np.empty(tile_shape, dtype=np.float64, order="F")
    if kind == "constant":
        tile[...] = first
    elif kind == "normal":
        randn(np, tile, seed=stream_seed(name, seed), mean=first, stddev=second,
              offset=offset, shape=shape)
    else:
        uniform(np, tile, seed=stream_seed(name, seed), low=first, high=second,
                offset=offset, shape=shape)
    return tile
