"""Generator (docs/design.md): the key/value-cache decode graph gives transformers'
greedy tokens (fp64, GPT-2 and Llama, single and tp on two simulated ranks); sampling
is seeded, honours top-k, and ranks agree."""

import numpy as np
import pytest
from safetensors.numpy import load_file

import nntile_spmd as nt
from nntile_spmd.models import gpt2, llama
from tests.models.gpt2_helpers import require_hf
from tests.models.test_pretrained import FAMILIES, hf_folder

PROMPT = np.random.default_rng(0).integers(0, 29, (3, 2))   # [T0, B]
NEW = 5   # GPT2_TINY's n_positions is 8
RAGGED = (1, 3)   # prompt lengths of PROMPT's two columns in the ragged test
MODULES = {"gpt2": (gpt2, gpt2.GPT2Config), "llama": (llama, llama.LlamaConfig)}


def greedy_reference(model, prompt=PROMPT, **options):
    torch, _ = require_hf()
    with torch.no_grad():   # no eos in the tiny configs below: HF stops only when told
        out = model.generate(torch.from_numpy(prompt.T.copy()), max_new_tokens=NEW,
                             do_sample=False, **options)
    return out.numpy().T


def references(model) -> dict:
    """transformers' greedy tokens: for PROMPT; for PROMPT's columns cut to RAGGED tokens,
    each alone; for PROMPT with an EOS that column 0 reaches at its second new token."""
    greedy = greedy_reference(model)
    eos = int(greedy[PROMPT.shape[0] + 1, 0])
    return {"greedy": greedy, "eos": eos,
            "alone": [greedy_reference(model, PROMPT[:length, [column]])[:, 0]
                      for column, length in enumerate(RAGGED)],
            "stopped": greedy_reference(model, eos_token_id=eos, pad_token_id=eos)}


def generator(family, path, comm, distribution="single"):
    module, config_class = MODULES[family]
    return module.Generator(config_class.from_pretrained(path), path, batch=PROMPT.shape[1],
                            max_length=PROMPT.shape[0] + NEW, dtype="fp64", comm=comm,
                            distribution=distribution)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def folder(request, tmp_path_factory):
    family = request.param
    path = tmp_path_factory.mktemp(family)
    model = hf_folder(family, path, bos_token_id=None, eos_token_id=None)
    found = references(model)
    return family, path, found.pop("greedy"), found


@pytest.mark.parametrize("ranks, distribution", [(1, "single"), (2, "single"), (2, "tp")])
def test_greedy_tokens_equal_transformers(folder, ranks, distribution):
    family, path, expected, _ = folder
    gen = generator(family, path, nt.SimulatedWorld(ranks), distribution)
    assert tuple(gen.model.input_ids.shape) == (1, PROMPT.shape[1])   # one token a step: a cache
    ids = gen.generate(PROMPT, max_new_tokens=NEW)
    assert ids.dtype == np.int64 and ids.shape == (PROMPT.shape[0] + NEW, PROMPT.shape[1])
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_array_equal(gen.generate(PROMPT, max_new_tokens=NEW), expected)


def test_sampling_is_seeded_and_top_k_one_is_greedy(folder):
    family, path, expected, _ = folder
    gen = generator(family, path, nt.SimulatedWorld(1))
    draw = [gen.generate(PROMPT, NEW, do_sample=True, temperature=1.5, seed=seed)
            for seed in (3, 3, 4)]
    np.testing.assert_array_equal(draw[0], draw[1])
    assert not np.array_equal(draw[0], draw[2])
    np.testing.assert_array_equal(draw[0][:PROMPT.shape[0]], PROMPT)
    np.testing.assert_array_equal(gen.generate(PROMPT, NEW, do_sample=True, top_k=1, seed=5),
                                  expected)


def test_bad_requests_are_refused(folder):
    family, path, _, _ = folder
    gen = generator(family, path, nt.SimulatedWorld(1))
    with pytest.raises(ValueError, match="exceed max_length"):
        gen.generate(PROMPT, NEW + 1)
    with pytest.raises(ValueError, match="prompt_ids must be int64"):
        gen.generate(PROMPT[:, :1], 1)
    with pytest.raises(ValueError, match="temperature"):
        gen.generate(PROMPT, 1, do_sample=True, temperature=0.0)


def test_weights_from_a_state_dict(folder):
    family, path, expected, _ = folder
    module, config_class = MODULES[family]
    state = load_file(str(path / "model.safetensors"))   # {HF name: ndarray}, as a user has
    gen = module.Generator(config_class.from_pretrained(path), state, batch=PROMPT.shape[1],
                           max_length=PROMPT.shape[0] + NEW, dtype="fp64",
                           comm=nt.SimulatedWorld(1))
    np.testing.assert_array_equal(gen.generate(PROMPT, NEW), expected)


def test_ragged_prompts_give_each_sequence_alone(folder):
    family, path, _, found = folder
    gen = generator(family, path, nt.SimulatedWorld(2), "tp")
    prompts = [PROMPT[:length, column] for column, length in enumerate(RAGGED)]
    out = gen.generate(prompts, NEW)
    assert [len(tokens) for tokens in out] == [length + NEW for length in RAGGED]
    for tokens, alone in zip(out, found["alone"]):
        np.testing.assert_array_equal(tokens, alone)


def test_generation_stops_at_eos_as_transformers_does(folder):
    family, path, _, found = folder
    gen = generator(family, path, nt.SimulatedWorld(1))
    np.testing.assert_array_equal(gen.generate(PROMPT, NEW, eos_token_id=found["eos"]),
                                  found["stopped"])
    ragged = gen.generate([PROMPT[:, 0], PROMPT[:, 1]], NEW, eos_token_id=found["eos"])
    new = list(found["stopped"][PROMPT.shape[0]:, 0])
    np.testing.assert_array_equal(   # a ragged sequence ends at its EOS, unpadded
        ragged[0], found["stopped"][:PROMPT.shape[0] + new.index(found["eos"]) + 1, 0])


def test_a_second_generator_of_the_same_shape_plans_nothing(folder, monkeypatch):
    """Generators compile through the process-wide plan cache (plan/cache.py): the same
    shapes again (decode graph and prompt length) reuse the plans, and compute the same
    tokens; another batch is another graph, planned anew."""
    from nntile_spmd.runtime import compile_steps
    family, path, expected, _ = folder
    generator(family, path, nt.SimulatedWorld(2), "tp").generate(PROMPT, NEW)
    planned = []
    real_plan_for = compile_steps.plan_for
    monkeypatch.setattr(compile_steps, "plan_for", lambda graph, request: planned.append(
        graph.name) or real_plan_for(graph, request))
    again = generator(family, path, nt.SimulatedWorld(2), "tp")
    np.testing.assert_array_equal(again.generate(PROMPT, NEW), expected)
    assert planned == []
    module, config_class = MODULES[family]
    module.Generator(config_class.from_pretrained(path), path, batch=3, max_length=4,
                     dtype="fp64", comm=nt.SimulatedWorld(2), distribution="tp")
    assert planned == ["generator_decode"], planned
