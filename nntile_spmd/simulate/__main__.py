"""python -m nntile_spmd.simulate: predicted step time, per-rank busy/idle, critical
path and peak memory of a training step of one of the workloads, and a timeline PNG."""

import argparse
import dataclasses
import os
import sys

from ..plan.device_profile import PROFILES
from ..plan.tiling import TilingStrategy
from . import MachineModel, simulate
from .machine import CORE_SHARING
from .timeline import draw_timeline
from .workloads import WORKLOADS


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m nntile_spmd.simulate",
                                     description=__doc__.split(":", 1)[1].strip())
    parser.add_argument("--model", choices=sorted(WORKLOADS), default="mlp")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--ranks-per-node", type=int, default=None,
                        help="ranks sharing one machine's cores (default: all)")
    parser.add_argument("--core-sharing", choices=CORE_SHARING, default=None,
                        help="how ranks use the cores: own (a core or more per rank, "
                             "the default), node (more ranks than cores, unbound), "
                             "bound (more ranks than cores, bound to a core each)")
    parser.add_argument("--strategy", default="single", help="single|ddp|fsdp|tp")
    parser.add_argument("--tile-bytes", type=int, default=None,
                        help="target tile bytes (default: 1 MiB; on a GPU device tiles "
                             "as large as the distribution allows)")
    parser.add_argument("--device", choices=sorted(PROFILES), default=None,
                        help="price tasks by this device profile's roofline instead of "
                             "a calibration file")
    parser.add_argument("--machine", default="machine.json",
                        help="a file written by python -m nntile_spmd.calibrate")
    parser.add_argument("--timeline", default=None, help="write the timeline to this PNG")
    return parser.parse_args(argv)


def cli_tiling(tile_bytes, device):
    """An explicit target as given; else 1 MiB on the CPU, device-sized on a GPU."""
    if tile_bytes is None and device is not None and PROFILES[device].whole_tiles:
        return TilingStrategy.auto(device=device)
    return TilingStrategy.auto(target_tile_bytes=tile_bytes or 1 << 20)


def main(argv=None):
    args = parse_args(argv)
    if args.device is not None:
        machine = MachineModel.for_device(args.device)
    elif os.path.exists(args.machine):
        machine = MachineModel.load(args.machine)
    else:
        print(f"{args.machine} not found: using uncalibrated defaults "
              "(run python -m nntile_spmd.calibrate first)", file=sys.stderr)
        machine = MachineModel()
    if args.core_sharing:
        machine = dataclasses.replace(machine, core_sharing=args.core_sharing)
    workload = WORKLOADS[args.model]()
    prediction = simulate(workload.graph, args.ranks, machine,
                          cli_tiling(args.tile_bytes, args.device),
                          args.strategy, ranks_per_node=args.ranks_per_node)
    print(f"{args.model}, {args.strategy}, machine model: {machine.source}")
    print(prediction.summary())
    if args.timeline:
        draw_timeline(prediction, args.timeline,
                      f"{args.model} {args.strategy} on {args.ranks} rank(s): predicted "
                      f"{prediction.step_s * 1e3:.1f} ms")
        print(f"timeline: {args.timeline}")


if __name__ == "__main__":
    main()
