"""Every op family on a SimulatedWorld against NumPy (plain pytest, one process).

Hypothesis draws the shapes, the tiling (manual tile sizes that need not divide
the dims, or auto with a small target), the preset and the world size (1..8);
each run must match NumPy, and every rank's measured bytes sent and peak bytes
must equal the plan's (see helpers.run_case).
"""

import pytest
from helpers import run_case
from hypothesis import given, settings
from hypothesis import strategies as st
from op_cases import OP_CASES

import nntile_spmd as nt

PRESETS = ("single", "ddp", "fsdp", "tp")


@st.composite
def runs(draw, case):
    """Keyword arguments of run_case, plus the world size."""
    sizes = {letter: draw(st.integers(1, 7), label=letter) for letter in case.letters()}
    tiles, target_bytes = None, None
    if draw(st.booleans(), label="manual tiling"):
        tiles = {letter: draw(st.integers(1, size)) for letter, size in sizes.items()}
    else:
        target_bytes = draw(st.sampled_from([8, 24, 64, 200, 1 << 20]), label="target bytes")
    return dict(sizes=sizes, tiles=tiles, target_bytes=target_bytes,
                distribution=draw(st.sampled_from(PRESETS), label="preset"),
                nranks=draw(st.integers(1, 8), label="ranks"),
                seed=draw(st.integers(0, 1000), label="seed"))


@pytest.mark.parametrize("case", OP_CASES, ids=str)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_op_matches_numpy_and_plan(case, data):
    run = data.draw(runs(case))
    nranks = run.pop("nranks")
    problems = run_case(case, comm=nt.SimulatedWorld(nranks), **run)
    assert not problems, f"{case} on {nranks} ranks with {run}: {problems}"


@pytest.mark.parametrize("case", OP_CASES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_op_on_four_ranks_uneven(case, preset):
    """A fixed uneven run of every case and preset (tiles of 2 on dims of 5 and 3)."""
    sizes = dict.fromkeys(case.letters(), 5) | dict.fromkeys(case.letters()[1::2], 3)
    tiles = dict.fromkeys(case.letters(), 2)
    problems = run_case(case, sizes, nt.SimulatedWorld(4), preset, tiles=tiles)
    assert not problems, f"{case} {preset}: {problems}"
