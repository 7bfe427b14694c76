"""Generator on real MPI ranks with a batch of one sequence, fewer batch tiles than ranks
under ddp and fsdp (each rank plans alone here, unlike on simulated ranks; a 0-d mask
crashed that path): transformers' greedy tokens, GPT-2 and Llama in fp64. Rank 0 makes
the tiny model and its reference and sends the weights to every rank; the verdict is
collective."""

import numpy as np
import pytest
from helpers import assert_no_rank_has_problems, guarded, on_rank_zero

from nntile_spmd.models import gpt2, llama

mpi4py = pytest.importorskip("mpi4py")
from mpi4py import MPI  # noqa: E402

NEW = 5
PROMPT = np.array([[3], [17], [9]])   # [T0, B] = [3, 1]
CONFIGS = {"gpt2": gpt2.GPT2Config, "llama": llama.LlamaConfig}


def reference(family, folder):
    """(config, {HF name: ndarray}, transformers' greedy tokens [T0 + NEW, 1])."""
    from nntile_spmd.models.pretrained import read_weights
    from tests.models.test_generation import greedy_reference
    from tests.models.test_pretrained import hf_folder
    model = hf_folder(family, folder, bos_token_id=None, eos_token_id=None)
    return (CONFIGS[family].from_pretrained(folder), read_weights(folder),
            greedy_reference(model, PROMPT))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """{family: reference(family)}, made on rank 0 and sent to every rank."""
    return on_rank_zero(MPI.COMM_WORLD, lambda: {
        family: reference(family, tmp_path_factory.mktemp(family)) for family in CONFIGS})


def problems_of(family, cfg, weights, expected, distribution):
    module = {"gpt2": gpt2, "llama": llama}[family]
    gen = module.Generator(cfg, weights, batch=1, max_length=PROMPT.shape[0] + NEW,
                           dtype="fp64", comm=MPI.COMM_WORLD, distribution=distribution)
    tokens = gen.generate(PROMPT, max_new_tokens=NEW)
    if not np.array_equal(tokens, expected):
        return [f"{family} {distribution}: {tokens[:, 0].tolist()} != "
                f"transformers' {expected[:, 0].tolist()}"]
    return []


# Llama plans its batch of one as GPT-2 does (the same shapes of masks): fsdp alone
@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("family, distribution", [("gpt2", "ddp"), ("gpt2", "fsdp"),
                                                  ("llama", "fsdp")])
def test_a_batch_of_one_generates_transformers_tokens(made, family, distribution):
    cfg, weights, expected = made[family]
    assert_no_rank_has_problems(MPI.COMM_WORLD, guarded(problems_of, family, cfg, weights,
                                                        expected, distribution))
