#!/bin/bash
# One GPU per rank by node-local rank: run as `srun ... slurm/gpu_per_rank.sh python ...`.
#
# Where Slurm already bound one GPU to each task (--gpus-per-task=1 with GPU binding)
# CUDA_VISIBLE_DEVICES holds one GPU and stays as it is. Where a task still sees all of
# its node's GPUs (--gpus-per-node, or a site that does not bind), the task with
# node-local id SLURM_LOCALID keeps only GPU number SLURM_LOCALID % (GPUs it sees), the
# formula nntile_spmd uses itself (runtime.threads.gpu_for_rank): either way each rank
# then sees exactly one GPU and uses it. Without GPUs (CPU partitions) it changes nothing.
set -euo pipefail

if [[ -n "${CUDA_VISIBLE_DEVICES:-}" && -n "${SLURM_LOCALID:-}" ]]; then
    IFS=, read -r -a visible <<< "${CUDA_VISIBLE_DEVICES}"
    export CUDA_VISIBLE_DEVICES="${visible[$(( SLURM_LOCALID % ${#visible[@]} ))]}"
fi
exec "$@"
