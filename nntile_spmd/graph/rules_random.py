"""Graph layer: rule of randn (NNTile's randn: dst is the block at `start` of a normal
tensor of shape `underlying_shape`). Each tile gets its offset in that tensor, so its
kernel draws exactly the numbers of its elements: every tiling and rank count gives the
same tensor. No numba, cupy or mpi4py here.
"""

from .registry import REQUIRED, OpSpec, register
from .rules_common import numel
from .rules_util import given_output, output_only_axes


def randn_offset(attrs, offsets):
    start = attrs["start"] or (0,) * len(offsets[0])
    return {"offset": tuple(s + o for s, o in zip(start, offsets[0]))}


register(OpSpec(name="randn", kernel="randn", num_inputs=0, num_outputs=1, infer=given_output,
                axes=output_only_axes,
                attrs={"seed": REQUIRED, "mean": 0.0, "stddev": 1.0, "start": None,
                       "underlying_shape": None},
                kernel_attrs=("seed", "mean", "stddev"), tile_params=randn_offset,
                shape_params=lambda attrs, i, o: {
                    "shape": tuple(attrs["underlying_shape"] or o[0])},
                flops=lambda attrs, i, o: 20 * numel(o[0]), differentiable=False))
