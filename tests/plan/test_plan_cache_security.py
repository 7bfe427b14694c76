"""The plan cache runs no one else's code: a planted plan file, forged as another local
user could forge it from the public code, is refused before its pickle is loaded; a
cache folder that others own or may write is not used; the files and the signing key
are this user's alone. The run plans as without a cache in every case."""

import hashlib
import json
import os
import pickle
import stat
import warnings

import pytest

import nntile_spmd as nt
from nntile_spmd import private_files
from nntile_spmd.plan import cache_file, cache_secret
from nntile_spmd.plan.cache import ENV_DIRECTORY, plan_key
from nntile_spmd.plan.plan_options import PlanOptions, PlanRequest

from test_plan_cache import mlp_graph, run_mlp


@pytest.fixture(autouse=True)
def own_config_folder(tmp_path, monkeypatch):
    """The signing key goes to a folder of the test's, not to the user's own."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


class Payload:
    """Unpickling it creates `marker`: the attacker's code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def attackers_key(graph, distribution="ddp"):
    options = PlanOptions()
    return plan_key(graph, PlanRequest(2, None, distribution, options))


def forged_file(marker, key, header_format) -> bytes:
    """A plan file as another user writes it: the key and library fingerprint computed
    from the public code; a signature under a key of their own (format 3) or the
    SHA-256 that the format 2 cache checked."""
    payload = pickle.dumps(Payload(marker))
    header = {"format": header_format, "key": key, "library": cache_file.library_fingerprint(),
              "bytes": len(payload)}
    if header_format == 3:
        header["hmac"] = cache_file.signature(b"the attacker's own key".ljust(32), header,
                                              payload)
    else:
        header["sha256"] = hashlib.sha256(payload).hexdigest()
    return cache_file.MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def compile_and_run(**arguments):
    cg = nt.compile(mlp_graph(), comm=nt.SimulatedWorld(2), distribution="ddp", **arguments)
    return run_mlp(cg)


@pytest.mark.parametrize("header_format", [3, 2])
def test_a_planted_plan_file_runs_no_code_and_the_run_plans_normally(tmp_path, monkeypatch,
                                                                     header_format):
    reference = compile_and_run(cache=False)
    folder, marker = tmp_path / "cache", tmp_path / "planted-code-ran"
    folder.mkdir(mode=0o700)
    key = attackers_key(mlp_graph())
    planted = folder / f"plan-{key}.pkl"
    planted.write_bytes(forged_file(marker, key, header_format))
    monkeypatch.setenv(ENV_DIRECTORY, str(folder))
    with pytest.warns(RuntimeWarning, match=f"{planted.name} is refused: "
                                            "(damaged or forged|written in another cache format)"):
        assert compile_and_run() == reference
    assert not marker.exists()
    assert compile_and_run(cache=nt.PlanCache(folder)) == reference    # the file rewritten
    assert not marker.exists()


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o770])
def test_a_folder_others_can_write_is_not_used(tmp_path, monkeypatch, mode):
    reference = compile_and_run(cache=False)
    shared, marker = tmp_path / "shared", tmp_path / "planted-code-ran"
    shared.mkdir()
    shared.chmod(mode)
    key = attackers_key(mlp_graph())
    (shared / f"plan-{key}.pkl").write_bytes(forged_file(marker, key, 3))
    monkeypatch.setenv(ENV_DIRECTORY, str(shared))
    with pytest.warns(RuntimeWarning, match=f"can be written by group or others \\(mode "
                                            f"{mode:o}\\).*planning without the disk cache"):
        assert compile_and_run() == reference
    assert not marker.exists()
    assert sorted(p.name for p in shared.iterdir()) == [f"plan-{key}.pkl"]   # nothing written


def test_a_folder_of_another_user_is_not_used(tmp_path, monkeypatch):
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    uid = folder.stat().st_uid
    monkeypatch.setattr(private_files.os, "geteuid", lambda: uid + 1)   # we are someone else
    with pytest.warns(RuntimeWarning, match="is owned by another user"):
        cache = nt.PlanCache(folder)
    assert cache.directory is None


def test_a_link_of_another_user_is_not_used(tmp_path, monkeypatch):
    """A link someone else planted (in a shared /tmp, say) could be repointed later: it
    is refused before the folder it points at is looked at; our own link is fine."""
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    link = tmp_path / "cache"
    link.symlink_to(ours)
    assert nt.PlanCache(link).directory is not None
    uid = link.lstat().st_uid
    monkeypatch.setattr(private_files.os, "geteuid", lambda: uid + 1)   # we are someone else
    with pytest.warns(RuntimeWarning, match="is a link owned by another user"):
        cache = nt.PlanCache(link)
    assert cache.directory is None


def test_a_file_as_the_cache_folder_is_named_and_the_run_goes_on(tmp_path, monkeypatch):
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("notes")
    monkeypatch.setenv(ENV_DIRECTORY, str(not_a_folder))
    with pytest.warns(RuntimeWarning, match=f"plan cache folder .*{not_a_folder} is a file, "
                                            "not a folder; planning without the disk cache"):
        assert compile_and_run() == compile_and_run(cache=False)
    assert not_a_folder.read_text() == "notes"


def test_a_folder_in_the_cache_files_place_is_named_and_the_run_goes_on(tmp_path):
    key = attackers_key(mlp_graph())
    (tmp_path / f"plan-{key}.pkl").mkdir()
    with pytest.warns(RuntimeWarning) as caught:
        assert compile_and_run(cache=nt.PlanCache(tmp_path)) == compile_and_run(cache=False)
    texts = [str(w.message) for w in caught]
    assert any("is refused: a folder is in the file's place" in t for t in texts), texts
    assert any("could not be written (a folder is in the file's place" in t for t in texts)


def test_the_files_and_the_key_are_private(tmp_path):
    compile_and_run(cache=nt.PlanCache(tmp_path / "cache"))
    (plan_file,) = (tmp_path / "cache").iterdir()
    key_file = tmp_path / "config" / "nntile_spmd" / cache_secret.FILE_NAME
    assert stat.S_IMODE(plan_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) & 0o077 == 0
    assert len(key_file.read_bytes()) == cache_secret.SECRET_BYTES
    first = key_file.read_bytes()
    assert cache_secret.user_secret() == first            # made once, then read


def test_a_key_others_can_read_or_a_link_is_refused(tmp_path):
    key_file = tmp_path / "config" / "nntile_spmd" / cache_secret.FILE_NAME
    cache_secret.user_secret()
    key_file.chmod(0o644)
    with pytest.warns(RuntimeWarning, match="can be read by others .*planning without"):
        assert nt.PlanCache(tmp_path / "cache").directory is None
    key_file.unlink()
    os.symlink(tmp_path / "elsewhere", key_file)
    with pytest.warns(RuntimeWarning, match="cannot be read .*a link is refused"):
        assert nt.PlanCache(tmp_path / "cache").directory is None


def test_a_private_folder_gives_no_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache = nt.PlanCache(tmp_path / "new" / "cache")
    assert cache.directory == str(tmp_path / "new" / "cache")


def test_ranks_starting_together_agree_on_one_key(tmp_path):
    """The ranks of a host make the key at the same moment: the link that publishes it
    lets one win, and every process reads the winner's."""
    import subprocess
    import sys
    script = ("import sys; from nntile_spmd.plan.cache_secret import user_secret; "
              "sys.stdout.write(user_secret().hex())")
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "config"))
    jobs = [subprocess.Popen([sys.executable, "-c", script], env=env, text=True,
                             stdout=subprocess.PIPE) for _ in range(4)]
    keys = {job.communicate(timeout=60)[0] for job in jobs}
    assert len(keys) == 1 and len(keys.pop()) == 2 * cache_secret.SECRET_BYTES
    folder = tmp_path / "config" / "nntile_spmd"
    assert sorted(p.name for p in folder.iterdir()) == [cache_secret.FILE_NAME]   # no temp


def test_a_key_that_cannot_be_made_turns_the_disk_cache_off(tmp_path, monkeypatch):
    def no_hard_links(source, target):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(cache_secret.os, "link", no_hard_links)
    with pytest.warns(RuntimeWarning, match="the plan cache's key .* cannot be made "
                                            r"\(Operation not permitted\); planning without"):
        cache = nt.PlanCache(tmp_path / "cache")
    assert cache.directory is None
    assert compile_and_run(cache=cache) == compile_and_run(cache=False)
