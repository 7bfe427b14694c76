"""A failing rank's flight record overwrites nothing but its own record: a link planted
in the flight folder under the temporary name the recorder used (rank1.json.tmp<pid>)
or under the record's own name is never followed, and a folder others can write is
refused, saying why on stderr, with no record written."""

import json
import os
import stat

import pytest

from nntile_spmd.runtime import flight


@pytest.fixture
def recorder(monkeypatch):
    monkeypatch.setattr(flight, "_written", set())     # each test's failure is the first
    return lambda folder: monkeypatch.setenv(flight.ENV_VARIABLE, str(folder))


def planted_links(folder, victim):
    """The links another user plants: the old temporary name of rank 1's record in this
    process, and the record's own name."""
    for name in (f"rank1.json.tmp{os.getpid()}", "rank1.json"):
        os.symlink(victim, folder / name)


def test_a_planted_link_is_not_followed(tmp_path, recorder):
    folder, victim = tmp_path / "flight", tmp_path / "users-own-file"
    folder.mkdir(mode=0o700)
    victim.write_text("the user's work")
    planted_links(folder, victim)
    recorder(folder)
    path = flight.record_failure(1, 2, "execute #3 of graph 'job'", "RuntimeError: boom")
    assert victim.read_text() == "the user's work"
    assert path == str(folder / "rank1.json") and not os.path.islink(path)
    assert json.loads((folder / "rank1.json").read_text())["reason"] == "RuntimeError: boom"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.readlink(folder / f"rank1.json.tmp{os.getpid()}") == str(victim)   # untouched


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o775])
def test_a_folder_others_can_write_gets_no_record(tmp_path, recorder, capsys, mode):
    folder, victim = tmp_path / "shared", tmp_path / "users-own-file"
    folder.mkdir()
    folder.chmod(mode)
    victim.write_text("the user's work")
    planted_links(folder, victim)
    recorder(folder)
    assert flight.record_failure(1, 2, "execute #3 of graph 'job'", "RuntimeError") is None
    assert victim.read_text() == "the user's work"
    assert (f"[rank 1] no flight record written: flight record folder "
            f"($NNTILE_SPMD_FLIGHT_DIR) {folder} can be written by group or others "
            f"(mode {mode:o})") in capsys.readouterr().err


def test_a_missing_folder_is_made_private(tmp_path, recorder):
    recorder(tmp_path / "new" / "flight")
    path = flight.record_failure(0, 2, "execute #0 of graph 'job'", "RecvTimeout")
    assert json.loads(open(path).read())["rank"] == 0
    assert stat.S_IMODE((tmp_path / "new" / "flight").stat().st_mode) & 0o077 == 0
