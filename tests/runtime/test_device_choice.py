"""Which device a rank computes on (runtime/device_choice.py): explicit names, the
NNTILE_SPMD_DEVICE variable, and the probe of device="auto", which says its choice."""

import pytest

import nntile_spmd as nt
from nntile_spmd.runtime import device_choice
from nntile_spmd.runtime.device_choice import DEVICE_VAR, resolve_device, set_default_device


@pytest.fixture
def fresh_probe(monkeypatch):
    """No device variable and no remembered probe."""
    monkeypatch.delenv(DEVICE_VAR, raising=False)
    device_choice.auto_device.cache_clear()
    yield
    device_choice.auto_device.cache_clear()


def test_the_cpu_tiers_pin_the_cpu():
    """tests/conftest.py: a GPU on the test machine does not move these tests onto it."""
    import os
    assert os.environ[DEVICE_VAR] == "cpu"
    assert resolve_device("auto") == "cpu"


def test_explicit_names_win_over_the_variable(monkeypatch):
    monkeypatch.setenv(DEVICE_VAR, "cuda")
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == "cuda"


def test_auto_probes_once_and_says_what_it_chose(fresh_probe, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(device_choice, "cuda_unusable_reason",
                        lambda: calls.append(1) or "CuPy sees no GPU")
    assert resolve_device("auto") == resolve_device("auto") == "cpu"
    assert len(calls) == 1
    assert capsys.readouterr().err.count("device 'auto' is cpu: CuPy sees no GPU") == 1


def test_a_cpu_only_install_stays_quiet(fresh_probe, monkeypatch, capsys):
    monkeypatch.setattr(device_choice, "cuda_unusable_reason", lambda: device_choice.NO_CUPY)
    assert resolve_device("auto") == "cpu"
    assert capsys.readouterr().err == ""


def test_auto_takes_a_gpu_only_where_a_kernel_runs(fresh_probe, monkeypatch, capsys):
    monkeypatch.setattr(device_choice, "cuda_unusable_reason", lambda: None)
    assert resolve_device("auto") == "cuda"
    assert "device 'auto' is cuda: a test kernel ran on the GPU" in capsys.readouterr().err


def test_the_probe_without_cupy_says_so(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_cupy(name, *args, **kwargs):
        if name == "cupy":
            raise ImportError("no cupy here")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_cupy)
    assert device_choice.cuda_unusable_reason() == "CuPy is not installed"


@pytest.mark.parametrize("bad", ["gpu", "CUDA", ""])
def test_bad_names_fail_before_planning(bad):
    graph = nt.LogicalGraph("g")
    graph.tensor([2], "x", external=True).mark_output()
    with pytest.raises(ValueError, match=f"unknown device {bad!r}"):
        nt.compile(graph, comm=nt.SimulatedWorld(1), device=bad)


def test_the_variable_is_checked_and_read_in_any_case(monkeypatch):
    monkeypatch.setenv(DEVICE_VAR, " CUDA ")
    assert resolve_device("auto") == "cuda"
    monkeypatch.setenv(DEVICE_VAR, "gpu")
    with pytest.raises(ValueError, match=f"\\${DEVICE_VAR}='gpu': expected one of"):
        resolve_device("auto")


def test_set_default_device(monkeypatch):
    monkeypatch.setenv(DEVICE_VAR, "cpu")
    set_default_device(None)
    assert resolve_device("auto") == "cpu"
    set_default_device("cuda")
    assert resolve_device("auto") == "cuda"
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        set_default_device("gpu")


def test_examples_device_option_sets_what_auto_means(monkeypatch):
    """train.cli.add_device_arg: --device, as parsed, is every later compile's "auto"."""
    import argparse

    from nntile_spmd.train.cli import add_device_arg
    monkeypatch.setenv(DEVICE_VAR, "cpu")
    parser = add_device_arg(argparse.ArgumentParser())
    assert parser.parse_args([]).device is None and resolve_device("auto") == "cpu"
    assert parser.parse_args(["--device", "cuda"]).device == "cuda"
    assert resolve_device("auto") == "cuda"
