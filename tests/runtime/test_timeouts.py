"""recv_timeout: validated, settable by $NNTILE_SPMD_RECV_TIMEOUT and the launcher flag."""

import pytest

import nntile_spmd as nt
from nntile_spmd import launch
from nntile_spmd.runtime.timeouts import DEFAULT_SECONDS, ENV_VARIABLE, resolve_timeout


def tiny_graph():
    g = nt.LogicalGraph("tiny")
    nt.ops.relu(g.tensor([2], "x", dtype="fp64", external=True), "y").mark_output()
    return g


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "soon", [3]])
def test_bad_recv_timeout_is_rejected_at_compile(value):
    with pytest.raises(ValueError, match="recv_timeout must be"):
        nt.compile(tiny_graph(), comm=nt.SimulatedWorld(2), recv_timeout=value)


def test_environment_variable_and_default(monkeypatch):
    monkeypatch.delenv(ENV_VARIABLE, raising=False)
    assert resolve_timeout() == DEFAULT_SECONDS
    monkeypatch.setenv(ENV_VARIABLE, "12.5")
    assert resolve_timeout() == 12.5
    assert resolve_timeout(3) == 3.0            # the argument wins
    monkeypatch.setenv(ENV_VARIABLE, "-2")
    with pytest.raises(ValueError, match=r"\$NNTILE_SPMD_RECV_TIMEOUT must be"):
        resolve_timeout()


def test_launcher_flag_exports_the_variable(capsys, monkeypatch):
    monkeypatch.setattr(launch, "find_mpiexec", lambda env=None: "/usr/bin/mpiexec")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert launch.main(["-n", "2", "--recv-timeout", "20", "--dry-run", "s.py"]) == 0
    assert f"{ENV_VARIABLE}=20.0" in capsys.readouterr().out
    assert launch.child_env(1, {}, recv_timeout=7)[ENV_VARIABLE] == "7.0"
    with pytest.raises(SystemExit):
        launch.main(["-n", "2", "--recv-timeout", "0", "s.py"])
