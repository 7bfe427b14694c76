"""GPT-2 against transformers' GPT2LMHeadModel in fp64 with device="cuda": logits, loss
and every parameter gradient on CuPy tiles, to the tolerances of the CPU parity test.

Marked gpu (tests/conftest.py skips it without CuPy or a CUDA device); it also needs
the hf extra, as tests/models/test_gpt2_parity.py (gpt2_helpers.require_hf).
"""

import pytest
from tests.models.gpt2_helpers import (SMALL_TILES, hf_reference,  # tests/models/gpt2_helpers.py
                                 parity_problems, run_ours)

import nntile_spmd as nt

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def reference():
    return hf_reference()


@pytest.mark.parametrize("tiles", [None, SMALL_TILES], ids=["auto", "small"])
@pytest.mark.parametrize("distribution", ["single", "ddp", "fsdp", "tp"])
@pytest.mark.parametrize("ranks", [1, 3])
def test_parity_with_transformers_on_cuda(reference, ranks, distribution, tiles):
    config, state, ids, targets, results = reference
    model, cg = run_ours(config, state, ids, targets, nt.SimulatedWorld(ranks),
                         distribution, tiles, device="cuda")
    assert cg.device.name == "cuda"
    assert parity_problems(model, cg, results) == []
