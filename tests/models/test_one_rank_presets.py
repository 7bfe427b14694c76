"""On one rank every preset plans the program `single` plans (the same instructions, in
the same order), for the graphs and tilings that tests run under every preset on 1, 2
and 3 ranks: so those tests run `single` alone on one rank (tests/helpers.py
`worlds_and_presets`). Plain pytest."""

import gpt2_helpers
import llama_helpers
import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2, llama
from tests.plan import test_plan_rank
from tests.runtime import test_threaded_executor


def graphs():
    """{name: (graph, tiling)}."""
    found = {f"plan_rank {name}": build() for name, build in test_plan_rank.GRAPHS.items()}
    for name, helpers, model in (
            ("gpt2", gpt2_helpers, gpt2.build_gpt2(gpt2.GPT2Config(**gpt2_helpers.TINY),
                                                   batch=gpt2_helpers.BATCH,
                                                   seq=gpt2_helpers.SEQ, dtype="fp64")),
            ("llama", llama_helpers, llama.build_llama(
                llama.LlamaConfig(**llama_helpers.TINY), batch=llama_helpers.BATCH,
                seq=llama_helpers.SEQ, dtype="fp64"))):
        found[f"{name} auto"] = (model.graph, None)
        found[f"{name} small"] = (model.graph, nt.TilingStrategy.manual(helpers.SMALL_TILES))
    found["threaded gpt2"] = (test_threaded_executor.gpt2_adamw().graph,
                              nt.TilingStrategy.manual(test_threaded_executor.GPT2_TILES))
    return found


@pytest.mark.parametrize("name", ["plan_rank mlp", "plan_rank gpt2", "plan_rank data_ops",
                                  "gpt2 auto", "gpt2 small", "llama auto", "llama small",
                                  "threaded gpt2"])
def test_on_one_rank_every_preset_plans_what_single_plans(name):
    graph, tiling = graphs()[name]
    single = nt.build_plan(graph, 1, tiling, "single").programs()[0]
    for preset in ("ddp", "fsdp", "tp"):
        assert nt.build_plan(graph, 1, tiling, preset).programs()[0] == single, preset
