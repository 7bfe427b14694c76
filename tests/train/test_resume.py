"""Periodic checkpoints, keep-last, resume from the latest complete one bit-for-bit,
and every kind of damaged checkpoint reported as one CheckpointError (single process)."""

import argparse
import json

import pytest
from train_helpers import make_trainer

from nntile_spmd.train import (CheckpointError, add_checkpoint_args, checkpoint_options,
                               complete_checkpoints, latest_checkpoint, load_checkpoint,
                               resume_path, save_checkpoint)


def periodic(root, every=3, keep_last=None):
    return {"checkpoint_dir": root, "checkpoint_every": every, "keep_last": keep_last}


def test_resumed_run_continues_bit_for_bit_with_the_saved_seed(tmp_path, data):
    full = make_trainer(2, "fsdp", seed=5, checkpoints=periodic(tmp_path)).fit(data, 8)
    assert [step for step, _ in complete_checkpoints(tmp_path)] == [3, 6]
    resumed = make_trainer(2, "fsdp", seed=0)      # another seed: the checkpoint's wins
    manifest = resumed.resume(latest_checkpoint(tmp_path))
    assert manifest["step"] == 6 and resumed.step == 6 and resumed.seed == 5
    assert resumed.fit(data, 2) == full[6:8]       # exactly: same ranks, preset, order


def test_resume_defaults_to_the_latest_complete_checkpoint(tmp_path, data):
    make_trainer(1, "single", checkpoints=periodic(tmp_path, every=2)).fit(data, 4)
    broken = tmp_path / "step-00000006"            # a save killed before its manifest
    broken.mkdir()
    (broken / "manifest.json").write_text('{"format": "nntile_spmd-checkpoint-2", "st')
    trainer = make_trainer(1, "single", checkpoints=periodic(tmp_path, every=2))
    assert trainer.resume()["step"] == 4
    fresh = make_trainer(1, "single", checkpoints=periodic(tmp_path / "empty"))
    assert fresh.resume() is None and fresh.step == 0


def test_keep_last_removes_older_checkpoints(tmp_path, data):
    make_trainer(2, "ddp", checkpoints=periodic(tmp_path, every=2, keep_last=2)).fit(data, 8)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000006", "step-00000008"]


def test_bad_policies_are_rejected():
    with pytest.raises(ValueError, match="checkpoint_every needs a checkpoint_dir"):
        make_trainer(1, checkpoints={"checkpoint_every": 2})
    with pytest.raises(ValueError, match="keep_last >= 1"):
        make_trainer(1, checkpoints={"checkpoint_dir": "x", "keep_last": 0})


def test_add_checkpoint_args():
    parser = add_checkpoint_args(argparse.ArgumentParser())
    args = parser.parse_args(["--checkpoint-dir", "c", "--checkpoint-every", "5",
                              "--keep-last", "3", "--resume"])
    assert checkpoint_options(args) == periodic("c", 5, 3) and resume_path(args) is None
    assert resume_path(parser.parse_args(["--resume", "c/step-00000005"])) == "c/step-00000005"
    assert resume_path(parser.parse_args([])) is False


def damage(kind, directory):
    manifest_path = directory / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    shard = directory / manifest["files"][-1]
    if kind == "truncated manifest":
        manifest_path.write_bytes(manifest_path.read_bytes()[:200])
    elif kind == "edited manifest":
        manifest["tiles"][0]["coord"] = [7, 7]
        manifest_path.write_text(json.dumps(manifest))
    elif kind == "edited manifest, checksum fixed":
        del manifest["tensors"]
        from nntile_spmd.train.checkpoint import manifest_checksum
        manifest["checksum"] = manifest_checksum(manifest)
        manifest_path.write_text(json.dumps(manifest))
    elif kind == "truncated shard":
        shard.write_bytes(shard.read_bytes()[:len(shard.read_bytes()) // 2])
    elif kind == "garbage shard":
        shard.write_bytes(b"\xff" * 64)
    elif kind == "bit flip":
        raw = bytearray(shard.read_bytes())
        raw[-5] ^= 0x10
        shard.write_bytes(bytes(raw))


DAMAGES = {"truncated manifest": "not valid JSON", "edited manifest": "checksum mismatch",
           "edited manifest, checksum fixed": "manifest is malformed",
           "truncated shard": "unreadable", "garbage shard": "unreadable",
           "bit flip": "checksum mismatch for tile"}


@pytest.mark.parametrize("kind", DAMAGES)
def test_every_damage_is_one_checkpoint_error(tmp_path, data, kind):
    trainer = make_trainer(2, "fsdp")
    trainer.fit(data, 1)
    save_checkpoint(trainer.cg, tmp_path, step=1)
    damage(kind, tmp_path)
    with pytest.raises(CheckpointError, match=DAMAGES[kind]):
        load_checkpoint(make_trainer(3, "tp").cg, tmp_path)


def test_wrong_step_is_an_error(tmp_path, data):
    trainer = make_trainer(1, "single")
    save_checkpoint(trainer.cg, tmp_path, step=4)
    with pytest.raises(CheckpointError, match="holds step 4, expected step 5"):
        load_checkpoint(trainer.cg, tmp_path, step=5)


def test_resume_falls_back_past_a_checkpoint_that_fails_verification(tmp_path, data):
    """The newest checkpoint's manifest verifies but a shard has a flipped bit: resume
    says so and continues from the one before (before: the run failed to start)."""
    full = make_trainer(1, "single", seed=3, checkpoints=periodic(tmp_path, every=2)).fit(data, 6)
    damage("bit flip", tmp_path / "step-00000006")
    resumed = make_trainer(1, "single", checkpoints=periodic(tmp_path, every=2))
    with pytest.warns(RuntimeWarning, match="skipping checkpoint .*step-00000006.*checksum "
                      "mismatch for tile"):
        assert resumed.resume()["step"] == 4
    assert resumed.fit(data, 2) == full[4:6]      # and saved step 6 again
    for step in (2, 4, 6):
        damage("bit flip", tmp_path / f"step-{step:08d}")
    with pytest.warns(RuntimeWarning), pytest.raises(CheckpointError, match="no checkpoint "
                                                     "under .* verifies"):
        make_trainer(1, "single", checkpoints=periodic(tmp_path, every=2)).resume()
    with pytest.raises(CheckpointError, match="checksum mismatch"):   # asked for: no fallback
        make_trainer(1, "single").resume(tmp_path / "step-00000006")


def test_a_record_pointing_at_another_tile_is_refused(tmp_path, data):
    """A manifest whose checksum was fixed after a record was pointed at another tile's
    bytes (their sha256 matches) would load wrong values without a word."""
    trainer = make_trainer(1, "single")
    save_checkpoint(trainer.cg, tmp_path, step=1)
    manifest_path = tmp_path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    first, second = manifest["tiles"][0], manifest["tiles"][1]
    first["key"], first["sha256"] = second["key"], second["sha256"]
    from nntile_spmd.train.checkpoint import manifest_checksum
    manifest["checksum"] = manifest_checksum(manifest)
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="points at tile|has shape"):
        load_checkpoint(make_trainer(1, "single").cg, tmp_path)
