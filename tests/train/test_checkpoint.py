"""Checkpoints: re-sharding across presets/rank counts, atomicity, checksums, safetensors."""

import json
import os

import numpy as np
import pytest
from train_helpers import make_trainer
from safetensors.numpy import load_file

from nntile_spmd.train import (CheckpointError, export_safetensors, import_safetensors,
                               load_checkpoint, save_checkpoint)
from nntile_spmd.train import checkpoint as checkpoint_module


def trained(ranks, distribution, data, steps=3, **options):
    trainer = make_trainer(ranks, distribution, **options)
    trainer.fit(data, steps)
    return trainer


def persistent_values(trainer):
    return {t.name: trainer.cg.get_output(t.name) for t in trainer.model.graph.tensors()
            if t.persistent}


def test_fsdp3_checkpoint_resumes_under_ddp2(tmp_path, data):
    source = trained(3, "fsdp", data)
    source.save(tmp_path)
    expected_next = source.fit(data, 2)
    target = make_trainer(2, "ddp")
    manifest = target.load(tmp_path)
    assert manifest["world_size"] == 3 and manifest["step"] == 3 == target.step
    np.testing.assert_allclose(target.fit(data, 2), expected_next, rtol=1e-12)
    for name, value in persistent_values(source).items():
        np.testing.assert_allclose(target.cg.get_output(name), value, rtol=1e-12, atol=1e-15,
                                   err_msg=name)


@pytest.mark.parametrize("source,target", [((2, "tp"), (3, "fsdp")), ((3, "ddp"), (1, "single")),
                                           ((1, "single"), (3, "tp"))])
def test_reload_into_other_tilings_and_presets(tmp_path, data, source, target):
    trainer = trained(*source, data, tile_bytes=200)
    save_checkpoint(trainer.cg, tmp_path, step=trainer.step)
    fresh = make_trainer(*target, tile_bytes=64)       # different tile boundaries too
    load_checkpoint(fresh.cg, tmp_path)
    for name, value in persistent_values(trainer).items():
        np.testing.assert_array_equal(fresh.cg.get_output(name), value, err_msg=name)


def test_manifest_and_shards(tmp_path, data):
    trainer = trained(3, "fsdp", data, steps=1)
    path = save_checkpoint(trainer.cg, tmp_path, step=1, extra={"note": "x"})
    manifest = json.loads(path.read_text())
    assert manifest["world_size"] == 3 and manifest["extra"] == {"note": "x"}
    assert set(manifest["tensors"]) == {t.name for t in trainer.model.graph.tensors()
                                        if t.persistent}
    w1 = manifest["tensors"]["w1"]
    assert w1["shape"] == [9, 6] and w1["dtype"] == "fp64" and w1["role"] == "parameter"
    owners = np.array(w1["owners"])
    np.testing.assert_array_equal(owners, trainer.cg.plan.owners["w1"])
    # every tile is written once: by its owner, replicated ones (the step counter) by rank 0
    for record in manifest["tiles"]:
        owner = np.array(manifest["tensors"][record["tensor"]]["owners"])[tuple(record["coord"])]
        assert f"rank{max(int(owner), 0):05d}" in record["file"]
    keys = [(r["tensor"], tuple(r["coord"])) for r in manifest["tiles"]]
    assert len(keys) == len(set(keys))
    assert len(manifest["files"]) == 3
    expected_files = sorted(manifest["files"] + ["manifest.json"])
    assert sorted(p.name for p in tmp_path.iterdir()) == expected_files


def test_second_save_replaces_the_first(tmp_path, data):
    trainer = trained(2, "fsdp", data, steps=1)
    trainer.save(tmp_path)
    first = json.loads((tmp_path / "manifest.json").read_text())["files"]
    trainer.fit(data, 1)
    trainer.save(tmp_path)
    second = json.loads((tmp_path / "manifest.json").read_text())["files"]
    assert not set(first) & set(second)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(second + ["manifest.json"])


@pytest.mark.parametrize("failing_write", [2, 3], ids=["shard", "manifest"])
def test_crash_mid_write_keeps_previous_checkpoint(tmp_path, data, monkeypatch, failing_write):
    trainer = trained(2, "fsdp", data, steps=2)
    trainer.save(tmp_path)
    saved = persistent_values(trainer)
    trainer.fit(data, 2)
    real_write, calls = checkpoint_module.write_atomic, []

    def crash_on_nth(path, payload):
        calls.append(path)
        if len(calls) == failing_write:    # write 1, 2: shards of rank 0, 1; 3: the manifest
            path.with_name(f".{path.name}.partial.tmp").write_bytes(payload[:10])
            raise OSError("disk full (simulated)")
        real_write(path, payload)

    monkeypatch.setattr(checkpoint_module, "write_atomic", crash_on_nth)
    with pytest.raises(CheckpointError, match="previous checkpoint is kept.*disk full"):
        trainer.save(tmp_path)
    monkeypatch.undo()
    fresh = make_trainer(3, "ddp")
    fresh.load(tmp_path)
    assert fresh.step == 2
    for name, value in saved.items():
        np.testing.assert_array_equal(fresh.cg.get_output(name), value, err_msg=name)
    trainer.save(tmp_path)       # the next save cleans up what the crash left behind
    names = json.loads((tmp_path / "manifest.json").read_text())["files"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names + ["manifest.json"])


def test_corrupted_tile_fails_its_checksum(tmp_path, data):
    trainer = trained(2, "fsdp", data, steps=1)
    save_checkpoint(trainer.cg, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    shard = tmp_path / manifest["files"][1]
    raw = bytearray(shard.read_bytes())
    raw[-3] ^= 0xFF                       # the last bytes are tile data, not the header
    shard.write_bytes(bytes(raw))
    fresh = make_trainer(2, "fsdp")
    before = fresh.cg.get_output("w1")
    with pytest.raises(CheckpointError, match="checksum mismatch for tile .*corrupted"):
        load_checkpoint(fresh.cg, tmp_path)
    np.testing.assert_array_equal(fresh.cg.get_output("w1"), before)   # nothing was bound


def test_load_errors(tmp_path, data):
    trainer = trained(1, "single", data, steps=1)
    with pytest.raises(CheckpointError, match="manifest.json is missing"):
        load_checkpoint(trainer.cg, tmp_path / "nothing")
    save_checkpoint(trainer.cg, tmp_path)
    sgd = make_trainer(1, "single", optimizer="sgd", lr=0.1, momentum=0.9)
    with pytest.raises(CheckpointError, match="lacks persistent tensor.*w1_velocity"):
        load_checkpoint(sgd.cg, tmp_path)
    load_checkpoint(sgd.cg, tmp_path, strict=False)        # parameters only
    np.testing.assert_array_equal(sgd.cg.get_output("w1"), trainer.cg.get_output("w1"))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / manifest["files"][0]).unlink()
    with pytest.raises(CheckpointError, match="is missing"):
        load_checkpoint(trainer.cg, tmp_path)


def test_safetensors_round_trip(tmp_path, data):
    trainer = trained(3, "fsdp", data, steps=2)
    path = tmp_path / "model.safetensors"
    names = export_safetensors(trainer.cg, path)
    assert names == ["w1", "b1", "w2", "b2"]
    arrays = load_file(str(path))
    assert arrays["w1"].shape == (9, 6) and arrays["b1"].shape == (9,)
    for name in names:
        np.testing.assert_array_equal(arrays[name], trainer.cg.get_output(name))
    fresh = make_trainer(2, "tp")
    assert import_safetensors(fresh.cg, path) == names
    for name in names:
        np.testing.assert_array_equal(fresh.cg.get_output(name), arrays[name])
    with pytest.raises(CheckpointError, match="not in the file: \\['w9'\\]"):
        import_safetensors(fresh.cg, path, names=["w9"])
    partial = tmp_path / "partial.safetensors"
    export_safetensors(trainer.cg, partial, names=["w1"])
    with pytest.raises(CheckpointError, match="parameter\\(s\\) \\['b1', 'w2', 'b2'\\]"):
        import_safetensors(fresh.cg, partial)
    assert import_safetensors(fresh.cg, partial, strict=False) == ["w1"]


@pytest.mark.parametrize("outside", ["relative", "absolute"])
def test_a_manifest_naming_a_file_outside_the_folder_is_refused(tmp_path, data, outside):
    """Before: "file": "../outside.safetensors" (or an absolute path) was read."""
    trainer = trained(2, "fsdp", data, steps=1)
    folder = tmp_path / "checkpoint"
    save_checkpoint(trainer.cg, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    shard = manifest["files"][0]
    os.replace(folder / shard, tmp_path / "outside.safetensors")
    name = {"relative": "../outside.safetensors",
            "absolute": str(tmp_path / "outside.safetensors")}[outside]
    for record in manifest["tiles"]:
        if record["file"] == shard:
            record["file"] = name
    manifest["checksum"] = checkpoint_module.manifest_checksum(manifest)   # public recipe
    (folder / "manifest.json").write_text(json.dumps(manifest))
    fresh = make_trainer(2, "fsdp")
    before = fresh.cg.get_output("w1")
    with pytest.raises(CheckpointError, match=f"file name '{name}' leaves the folder"):
        load_checkpoint(fresh.cg, folder)
    np.testing.assert_array_equal(fresh.cg.get_output("w1"), before)


def test_a_user_file_named_like_a_shard_is_kept(tmp_path, data):
    trainer = trained(2, "fsdp", data, steps=1)
    mine = tmp_path / "ckpt-mine.rank00000-of-00001.safetensors"
    mine.write_text("the user's own notes")
    theirs = tmp_path / "ckpt-theirs.rank00000-of-00001.safetensors"
    export_safetensors(trainer.cg, theirs)            # a safetensors file, not a shard
    trainer.save(tmp_path)
    trainer.fit(data, 1)
    trainer.save(tmp_path)
    names = json.loads((tmp_path / "manifest.json").read_text())["files"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        names + ["manifest.json", mine.name, theirs.name])   # the first save's shards: gone
    assert mine.read_text() == "the user's own notes"


@pytest.mark.parametrize("wrong", ["shape", "dtype"])
def test_import_checks_every_tensor_before_binding_any(tmp_path, data, wrong):
    """Before: a late wrong shape raised after w1 and b1 were overwritten."""
    from safetensors.numpy import save_file
    source = trained(1, "single", data, steps=2)
    arrays = {name: source.cg.get_output(name) for name in ["w1", "b1", "w2", "b2"]}
    arrays["w2"] = {"shape": arrays["w2"][:, :-1],
                    "dtype": arrays["w2"].astype(np.float32)}[wrong]
    path = tmp_path / "late.safetensors"
    save_file({n: np.ascontiguousarray(a) for n, a in arrays.items()}, str(path))
    fresh = make_trainer(2, "tp")
    before = {name: fresh.cg.get_output(name) for name in arrays}
    with pytest.raises(CheckpointError, match="nothing was bound: w2 is"):
        import_safetensors(fresh.cg, path)
    for name, value in before.items():
        np.testing.assert_array_equal(fresh.cg.get_output(name), value, err_msg=name)
