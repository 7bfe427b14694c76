"""Local Hugging Face model folders in and out (docs/design.md): folders written by
transformers' own save_pretrained (tiny random models, offline) load under every preset
and give transformers' logits in fp64; our save_pretrained writes a folder transformers
loads unchanged; the Hub's key names, sharded indexes and bad folders."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2, llama
from nntile_spmd.models.pretrained import PretrainedError
from tests.models.gpt2_helpers import require_hf

GPT2_TINY = dict(vocab_size=29, n_positions=8, n_embd=12, n_layer=1, n_head=2,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                 eos_token_id=0)
LLAMA_TINY = dict(vocab_size=29, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                  bos_token_id=0, eos_token_id=0)
FAMILIES = {"gpt2": (gpt2, "GPT2", "GPT2LMHeadModel", gpt2.build_gpt2, GPT2_TINY),
            "llama": (llama, "Llama", "LlamaForCausalLM", llama.build_llama, LLAMA_TINY)}
BATCH, SEQ = 2, 6
# transformers computes Llama's rotary frequencies in fp32 even in an fp64 model (our
# tables are fp64; tests/models/llama_helpers.py patches HF for 1e-9 parity)
RTOL = {"gpt2": 1e-9, "llama": 1e-6}
PRESETS = ["single", "ddp", "fsdp", "tp"]


def hf_folder(family, path, seed=0, **overrides):
    """A tiny random fp64 transformers model saved by its own save_pretrained."""
    torch, transformers = require_hf()
    _, config_name, model_name, _, tiny = FAMILIES[family]
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(getattr(transformers, config_name + "Config")(
        **tiny | overrides)).double().eval()
    with torch.no_grad():   # biases and norms away from HF's 0/1 init, so a mixup shows
        for param in model.parameters():
            if param.ndim == 1:
                param.add_(0.1 * torch.randn_like(param))
    model.save_pretrained(path)
    return model


def hf_logits(model_or_path, family, ids):
    """transformers' logits for ids [T, B], as [V, T, B]."""
    torch, transformers = require_hf()
    model = model_or_path
    if not hasattr(model, "forward"):
        model = getattr(transformers, FAMILIES[family][2]).from_pretrained(
            model_or_path, dtype=torch.float64).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(ids.T.copy())).logits.numpy()
    return logits.transpose(2, 1, 0)


def ours(family, path, distribution, comm):
    """(model, cg) of the folder at `path`, loaded."""
    module, _, _, build, _ = FAMILIES[family]
    config_class = gpt2.GPT2Config if family == "gpt2" else llama.LlamaConfig
    cfg = config_class.from_pretrained(path)
    model = build(cfg, batch=BATCH, seq=SEQ, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=comm, distribution=distribution)
    model.load_pretrained(cg, path)
    return model, cg


def logits_of(cg, ids):
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", ids)
    cg.execute()
    cg.wait()
    return cg.get_output("logits")


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("distribution", PRESETS)
def test_round_trip_through_transformers(family, distribution, tmp_path):
    reference = hf_folder(family, tmp_path / "hf")
    ids = np.asfortranarray(np.random.default_rng(1).integers(0, 29, (SEQ, BATCH)))
    model, cg = ours(family, tmp_path / "hf", distribution, nt.SimulatedWorld(2))
    expected = hf_logits(reference, family, ids)
    np.testing.assert_allclose(logits_of(cg, ids), expected, rtol=RTOL[family], atol=1e-8)
    model.save_pretrained(cg, tmp_path / "ours")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "ours"]   # no temp left
    np.testing.assert_allclose(hf_logits(tmp_path / "ours", family, ids), expected,
                               rtol=1e-12, atol=1e-14)   # the same weights, bit for bit


def hub_style(source, target, strip, shards=2):
    """The folder at `source` rewritten as the Hub stores big models: names without the
    LM-head model's prefix, weights in `shards` files named by an index."""
    from safetensors.numpy import load_file, save_file
    target.mkdir()
    (target / "config.json").write_text((source / "config.json").read_text())
    arrays = {name.removeprefix(strip): a for name, a in
              load_file(str(source / "model.safetensors")).items()}
    names = sorted(arrays)
    weight_map = {}
    for shard in range(shards):
        file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        part = names[shard::shards]
        save_file({name: arrays[name] for name in part}, str(target / file),
                  metadata={"format": "pt"})
        weight_map |= dict.fromkeys(part, file)
    (target / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


@pytest.mark.parametrize("family, strip", [("gpt2", "transformer."), ("llama", "model.")])
def test_hub_names_and_sharded_index(family, strip, tmp_path):
    reference = hf_folder(family, tmp_path / "hf")
    hub_style(tmp_path / "hf", tmp_path / "hub", strip)
    ids = np.asfortranarray(np.random.default_rng(2).integers(0, 29, (SEQ, BATCH)))
    _, cg = ours(family, tmp_path / "hub", "single", nt.SimulatedWorld(1))
    np.testing.assert_allclose(logits_of(cg, ids), hf_logits(reference, family, ids),
                               rtol=RTOL[family], atol=1e-8)


def test_bad_folders_say_what_is_wrong(tmp_path):
    hf_folder("gpt2", tmp_path / "hf")
    with pytest.raises(PretrainedError, match="not a folder"):
        gpt2.GPT2Config.from_pretrained(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PretrainedError, match="no config.json"):
        gpt2.GPT2Config.from_pretrained(tmp_path / "empty")
    with pytest.raises(PretrainedError, match="model_type 'gpt2', expected 'llama'"):
        llama.LlamaConfig.from_pretrained(tmp_path / "hf")
    cfg = gpt2.GPT2Config.from_pretrained(tmp_path / "hf")
    model = gpt2.build_gpt2(cfg, batch=1, seq=4, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1))
    (tmp_path / "hf" / "model.safetensors").rename(tmp_path / "elsewhere.safetensors")
    with pytest.raises(PretrainedError, match="no weights: none of model.safetensors"):
        model.load_pretrained(cg, tmp_path / "hf")
    other = gpt2.build_gpt2(gpt2.GPT2Config(**{**cfg.__dict__, "n_layer": 2}), batch=1,
                            seq=4, dtype="fp64", with_grads=False)
    with pytest.raises(ValueError, match=r"differs from the model's in \['n_layer'\]"):
        other.load_pretrained(cg, tmp_path / "hf")


def test_missing_and_unexpected_keys_are_named(tmp_path):
    cfg = gpt2.GPT2Config(**{k: v for k, v in GPT2_TINY.items() if not k.endswith("id")})
    model = gpt2.build_gpt2(cfg, batch=1, seq=4, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1))
    state = {name: np.zeros(1) for name, _, _ in model.hf_table()}
    state.pop("transformer.ln_f.bias")
    state["h.0.attn.extra"] = np.zeros(1)
    with pytest.raises(KeyError, match=r"unexpected \['h.0.attn.extra'\], missing "
                                       r"\['transformer.ln_f.bias'\]"):
        model.load_hf_state_dict(cg, state)


def test_a_bf16_folder_loads_exactly(tmp_path):
    torch, _ = require_hf()
    model = hf_folder("gpt2", tmp_path / "fp64")
    model.to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    reference = model.double()   # the bf16 values, exactly, in fp64
    ids = np.asfortranarray(np.random.default_rng(5).integers(0, 29, (SEQ, BATCH)))
    _, cg = ours("gpt2", tmp_path / "bf16", "single", nt.SimulatedWorld(1))
    np.testing.assert_allclose(logits_of(cg, ids), hf_logits(reference, "gpt2", ids),
                               rtol=1e-9, atol=1e-10)


def test_a_bf16_file_reads_without_torch(tmp_path):
    """bf16 is read as ml_dtypes' bfloat16, in a process where torch cannot be imported
    and nothing loaded ml_dtypes before (import nntile_spmd does not)."""
    import ml_dtypes
    from safetensors.numpy import save_file
    values = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    save_file({"w": values.astype(ml_dtypes.bfloat16)}, str(tmp_path / "w.safetensors"))
    script = ("import sys; sys.modules['torch'] = None\n"
              "from pathlib import Path\n"
              "from nntile_spmd.models.pretrained import read_safetensors\n"
              f"w = read_safetensors(Path({str(tmp_path / 'w.safetensors')!r}))['w']\n"
              "print(w.dtype, w.astype('float32').ravel().tolist())")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split(" ", 1) == ["bfloat16", f"{values.ravel().tolist()}\n"]


def test_saving_into_the_loaded_folder_keeps_every_other_file(tmp_path):
    """Before: the folder was replaced whole (['notes.txt', 'tokenizer.json'] were gone
    after a save into the folder the model was loaded from)."""
    hf_folder("gpt2", tmp_path / "hf")
    folder = tmp_path / "hf"
    (folder / "tokenizer.json").write_text('{"model": "user"}')
    (folder / "notes.txt").write_text("from before")
    before = sorted(p.name for p in folder.iterdir())
    model, cg = ours("gpt2", folder, "single", nt.SimulatedWorld(1))
    expected = model.hf_state_dict(cg)
    model.save_pretrained(cg, folder)
    model.save_pretrained(cg, folder)
    assert sorted(p.name for p in folder.iterdir()) == before      # no file lost, no temp left
    assert (folder / "tokenizer.json").read_text() == '{"model": "user"}'
    assert (folder / "notes.txt").read_text() == "from before"
    assert json.loads((folder / "config.json").read_text())["model_type"] == "gpt2"
    again, cg_again = ours("gpt2", folder, "single", nt.SimulatedWorld(1))
    for name, value in again.hf_state_dict(cg_again).items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_an_index_shard_outside_the_folder_is_refused(tmp_path):
    hf_folder("gpt2", tmp_path / "hf")
    folder = tmp_path / "hf"
    os.replace(folder / "model.safetensors", tmp_path / "x")       # the file outside
    for shard in ("../x", str(tmp_path / "x")):
        index = {"metadata": {}, "weight_map": {"wte.weight": shard}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
        with pytest.raises(ValueError, match="weight_map: file name .* leaves the folder"):
            ours("gpt2", folder, "single", nt.SimulatedWorld(1))


@pytest.mark.parametrize("content, reason", [
    ('{"model_type": "gpt2", "n_embd": 3', "not valid JSON, truncated or edited"),
    ('[{"model_type": "gpt2"}]', "holds a JSON list, an object of fields is expected")])
def test_a_damaged_config_json_is_named(tmp_path, content, reason):
    """Before: a JSONDecodeError without the file's name; AttributeError for a list."""
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(PretrainedError, match=f"{tmp_path / 'config.json'}: {reason}"):
        gpt2.GPT2Config.from_pretrained(tmp_path)


def test_a_damaged_index_is_named(tmp_path):
    from nntile_spmd.models.pretrained import read_weights
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"weight_map": {"wte.weight": "model-00001')
    with pytest.raises(PretrainedError, match=f"{index}: not valid JSON"):
        read_weights(tmp_path)
    index.write_text('{"metadata": {}}')
    with pytest.raises(PretrainedError, match=f"{index}: no \"weight_map\" object"):
        read_weights(tmp_path)
