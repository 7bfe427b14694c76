"""pytorch_model.bin folders (models/pretrained.py): read through torch.load with
weights_only=True, one file or the shards its index names, bf16 as fp32; the same arrays
and logits as the folder's safetensors; a pickle that would run code, and a folder read
without torch installed, are refused naming the file."""

import json
import shutil
import sys

import numpy as np
import pytest

import nntile_spmd as nt
from nntile_spmd.models import gpt2
from nntile_spmd.models.pretrained import PretrainedError, read_weights
from tests.models.gpt2_helpers import require_hf
from tests.models.test_pretrained import hf_folder, hf_logits


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(safetensors folder, the same weights as one pytorch_model.bin, as two shards)."""
    torch, _ = require_hf()
    root = tmp_path_factory.mktemp("torch_weights")
    model = hf_folder("gpt2", root / "safetensors")
    state = model.state_dict()
    for name in ("bin", "shards"):
        (root / name).mkdir()
        shutil.copy(root / "safetensors" / "config.json", root / name)
    torch.save(state, root / "bin" / "pytorch_model.bin")
    names = sorted(state)
    shards = {"pytorch_model-00001-of-00002.bin": names[::2],
              "pytorch_model-00002-of-00002.bin": names[1::2]}
    for shard, keys in shards.items():
        torch.save({key: state[key] for key in keys}, root / "shards" / shard)
    (root / "shards" / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"weight_map": {key: shard for shard, keys in shards.items() for key in keys}}))
    return root


@pytest.mark.parametrize("form", ["bin", "shards"])
def test_a_torch_pickle_reads_as_the_safetensors(folders, form):
    expected = read_weights(folders / "safetensors")
    found = read_weights(folders / form)
    # torch's state_dict holds the tied head too (safetensors leaves it out): the same array
    np.testing.assert_array_equal(found.pop("lm_head.weight"),
                                  expected["transformer.wte.weight"])
    assert found.keys() == expected.keys()
    for name, array in expected.items():
        np.testing.assert_array_equal(found[name], array, err_msg=name)
        assert found[name].dtype == array.dtype


def test_the_model_loads_it_with_transformers_logits(folders):
    cfg = gpt2.GPT2Config.from_pretrained(folders / "bin")
    ids = np.asfortranarray(np.random.default_rng(1).integers(0, cfg.vocab_size, (5, 2)))
    model = gpt2.build_gpt2(cfg, batch=2, seq=5, dtype="fp64", with_grads=False)
    cg = nt.compile(model.graph, comm=nt.SimulatedWorld(1))
    model.load_pretrained(cg, folders / "bin")
    cg.bind_data("input_ids", ids)
    cg.bind_data("targets", ids)
    cg.execute()
    cg.wait()
    np.testing.assert_allclose(cg.get_output("logits"),
                               hf_logits(folders / "safetensors", "gpt2", ids),
                               rtol=1e-9, atol=1e-8)


def test_bf16_tensors_become_fp32(tmp_path):
    torch, _ = require_hf()
    value = torch.tensor([1.5, -2.25], dtype=torch.bfloat16)
    torch.save({"w": value}, tmp_path / "pytorch_model.bin")
    found = read_weights(tmp_path)["w"]
    assert found.dtype == np.float32 and found.tolist() == [1.5, -2.25]


class RunsCode:
    """A pickle that would call a function of the file's choosing when loaded."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (shutil.copy, (__file__, self.marker))


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    torch, _ = require_hf()
    marker = tmp_path / "ran"
    torch.save({"w": RunsCode(marker)}, tmp_path / "pytorch_model.bin")
    with pytest.raises(PretrainedError, match=r"pytorch_model.bin: torch.load\(weights_only"):
        read_weights(tmp_path)
    assert not marker.exists()


def test_without_torch_the_file_is_refused_naming_it(folders, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)   # import torch fails
    with pytest.raises(PretrainedError, match="pytorch_model.bin: a PyTorch pickle; install"):
        read_weights(folders / "bin")
