"""The examples run as documented and print what they promise.

Each example's `main(argv)` runs in this process on simulated ranks (`--simulate N`),
or on this process's one-rank MPI world; one real `mpiexec` job per distinct launch
path: a script on MPI ranks (train_mlp.py) and torch.distributed set up beside MPI
(compare_strategies.py --torch).
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"strategy", "ranks", "final_loss", "test_accuracy", "step_time_ms",
        "peak_bytes_per_rank", "bytes_sent_per_step"}
MPIEXEC = Path(sys.executable).with_name("mpiexec")
needs_mpiexec = pytest.mark.skipif(not MPIEXEC.exists(), reason="needs the venv's mpiexec "
                                   "(the mpich wheel of the test extra)")


def run(command, timeout=300):
    """stdout of a job started from the repository root; fails on a non-zero exit."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def load_example(name):
    """An example script as a module, in this process (its imports, not its main)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(name, argv, capsys):
    """What example `name`'s main(argv) prints, run in this process."""
    load_example(name).main([str(arg) for arg in argv])
    return capsys.readouterr().out


def last_json(stdout):
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert KEYS <= set(summary), summary
    return summary


@pytest.mark.parametrize("strategy", ["single", "ddp", "fsdp", "tp"])
def test_train_mlp_short_run_prints_json(strategy, tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    summary = last_json(run_main("train_mlp", [
        "--strategy", strategy, "--simulate", 3, "--steps", 3, "--hidden", 32, "--target", 0,
        "--log", log, "--checkpoint", tmp_path / "ckpt"], capsys))
    assert summary["strategy"] == strategy and summary["ranks"] == 3
    assert len(summary["peak_bytes_per_rank"]) == 3
    assert (summary["bytes_sent_per_step"] > 0) == (strategy != "single")
    assert len(log.read_text().splitlines()) == 3
    assert (tmp_path / "ckpt" / "manifest.json").exists()


@pytest.mark.slow
def test_train_mlp_default_run_reaches_target(capsys):
    summary = last_json(run_main("train_mlp", ["--strategy", "fsdp", "--simulate", 2], capsys))
    assert summary["test_accuracy"] >= 0.95


def test_train_mlp_fails_loudly_below_target(capsys):
    """Without --simulate the script runs on this process's MPI world (one rank)."""
    with pytest.raises(SystemExit) as failed:
        run_main("train_mlp", ["--steps", 2, "--hidden", 16], capsys)
    assert str(failed.value.code).startswith("FAILED: test accuracy"), failed.value.code
    assert '"ranks": 1' in capsys.readouterr().out


@needs_mpiexec
def test_train_mlp_under_mpiexec():
    stdout = run([str(MPIEXEC), "-n", "2", sys.executable, "examples/train_mlp.py",
                  "--strategy", "ddp", "--steps", "3", "--hidden", "32", "--target", "0",
                  "--accumulation", "2"])
    summary = last_json(stdout)
    assert summary["ranks"] == 2 and stdout.count('"strategy"') == 1   # rank 0 prints


@pytest.mark.slow
def test_compare_strategies_adds_meshes_on_four_ranks(tmp_path, capsys):
    plot = tmp_path / "compare.png"
    stdout = run_main("compare_strategies", ["--simulate", 4, "--steps", 2, "--hidden", 32,
                                             "--plot", plot], capsys)
    assert "loss curves of all presets agree" in stdout and "ZeRO" in stdout
    assert "dp2xtp2    dp ours" in stdout and "fsdp2xtp2  fsdp ours" in stdout
    assert "yes, for every preset" in stdout
    assert plot.stat().st_size > 1000


def test_compare_strategies_auto_prints_the_ranked_candidates(tmp_path, capsys):
    from nntile_spmd.simulate import MachineModel
    MachineModel().save(tmp_path / "machine.json")     # no calibration in the test
    stdout = run_main("compare_strategies", [
        "--simulate", 2, "--auto", "--hidden", 32, "--memory-budget", 400000, "--machine",
        tmp_path / "machine.json"], capsys)
    assert "nt.autoplan on 2 rank(s), memory budget 400000" in stdout
    assert "predicted ms/step" in stdout and "\n1 " in stdout


@pytest.mark.slow
@needs_mpiexec
def test_compare_strategies_torch_side_by_side():
    """Its cost is importing torch and transformers on both ranks: the model is tiny."""
    stdout = run([str(MPIEXEC), "-n", "2", sys.executable, "examples/compare_strategies.py",
                  "--model", "gpt2", "--torch", "--steps", "2", "--gpt2", "1,32,2,16",
                  "--batch", "4"])
    rows = {line.split()[0] + " " + line.split()[1]: line.split() for line in
            stdout.splitlines() if line.startswith(("ours ", "torch "))}
    assert set(rows) == {"ours ddp", "ours fsdp", "torch ddp", "torch fsdp2"}
    assert len({row[-1] for row in rows.values()}) == 1      # the same final loss


def test_compare_strategies_torch_refuses_before_training(monkeypatch, capsys):
    """Without torch, --torch names the extra to install before it trains anything; with
    --plot it says that it draws no plot."""
    module = load_example("compare_strategies")
    with pytest.raises(SystemExit):
        module.parse_args(["--model", "gpt2", "--torch", "--plot", "out.png"])
    assert "--plot" in capsys.readouterr().err
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "torch" else find_spec(name, *rest))
    with pytest.raises(SystemExit, match=r"needs torch, not installed.*pip install -e '\.\[hf\]'"):
        module.parse_args(["--model", "gpt2", "--torch"])


def test_torch_side_help_says_what_it_is():
    stdout = run([sys.executable, "examples/torch_side.py", "--help"], timeout=60)
    assert "PyTorch DDP and\nFSDP2" in stdout and "compare_strategies.py --help" in stdout


@pytest.mark.slow
def test_finetune_saves_a_folder_transformers_loads(tmp_path, capsys):
    from tests.models.test_pretrained import hf_folder, hf_logits
    hf_folder("gpt2", tmp_path / "tiny", vocab_size=256, n_positions=32)
    (tmp_path / "text.txt").write_text((ROOT / "docs" / "pretrained.md").read_text())
    stdout = run_main("finetune", [tmp_path / "tiny", tmp_path / "text.txt", "--out",
                                   tmp_path / "out", "--steps", 3, "--seq", 16, "--sample", 4,
                                   "--simulate", 2], capsys)
    assert stdout.count("gpt2 fsdp on 2 rank(s)") == 1 and "--- sample ---" in stdout
    ids = np.arange(12).reshape(6, 2) % 256
    assert np.isfinite(hf_logits(tmp_path / "out", "gpt2", ids)).all()


@pytest.mark.slow
def test_finetune_trains_on_the_ids_of_vocab_and_merges(tmp_path, capsys, monkeypatch):
    """A GPT-2 folder with vocab.json + merges.txt and no tokenizer.json trains on the ids
    transformers' GPT2Tokenizer gives for the text (it read bytes before, then failed to
    decode its sample), and its sample decodes."""
    from tests.models.test_pretrained import hf_folder
    from tests.models.test_text_codec import CORPUS, write_bpe_files
    from tests.models.gpt2_helpers import require_hf
    _, transformers = require_hf()
    hf_folder("gpt2", tmp_path / "tiny", vocab_size=320, n_positions=32)
    write_bpe_files(tmp_path / "tiny")
    (tmp_path / "text.txt").write_text(CORPUS)
    finetune = load_example("finetune")
    trained_on = []
    real_windows = finetune.windows
    monkeypatch.setattr(finetune, "windows", lambda ids, *args: trained_on.append(ids) or
                        real_windows(ids, *args))
    finetune.main([str(arg) for arg in (tmp_path / "tiny", tmp_path / "text.txt", "--out",
                                        tmp_path / "out", "--steps", 2, "--seq", 16,
                                        "--sample", 4, "--simulate", 2)])
    reference = transformers.GPT2Tokenizer(str(tmp_path / "tiny" / "vocab.json"),
                                           str(tmp_path / "tiny" / "merges.txt"))
    assert trained_on and all(ids.tolist() == reference.encode(CORPUS) for ids in trained_on)
    assert "--- sample ---" in capsys.readouterr().out
    assert (tmp_path / "out" / "merges.txt").is_file()   # the saved folder keeps its tokenizer


def test_finetune_refuses_a_tokenizer_it_cannot_read_before_training(tmp_path):
    from tests.models.test_pretrained import hf_folder
    hf_folder("gpt2", tmp_path / "tiny", vocab_size=320, n_positions=32)
    (tmp_path / "tiny" / "vocab.json").write_text("{}")
    (tmp_path / "text.txt").write_text("some text " * 20)
    with pytest.raises(SystemExit, match="vocab.json without merges.txt"):
        load_example("finetune").main([str(tmp_path / "tiny"), str(tmp_path / "text.txt"),
                                       "--out", str(tmp_path / "out"), "--simulate", "2"])
    assert not (tmp_path / "out").exists()


# The documented commands of the examples not run under mpiexec above, each cut to a few
# steps of a tiny model: one job runs them one after the other (each main() on the job's
# real 2-rank world; imports and kernels loaded once), a few seconds each.
DOCUMENTED_COMMANDS = [
    ("train_gpt2", "--strategy fsdp --steps 2 --n-layer 1 --n-embd 16 --n-head 2 --seq 16 "
                   "--batch 4 --eval-batches 1 --corpus-bytes 20000 --no-progress"),
    ("train_gpt2", "--model llama --strategy fsdp --steps 2 --n-layer 1 --n-embd 16 "
                   "--n-head 2 --seq 16 --batch 4 --eval-batches 1 --corpus-bytes 20000 "
                   "--no-progress"),
    ("train_cnn", "--strategy fsdp --steps 2 --batch 8 --target 0"),
    # docs/pretrained.md's command (fsdp): it samples with Generator(batch=1), fewer batch
    # tiles than ranks, which crashed on real ranks only (a rank plans alone there)
    ("finetune", "tiny notes.txt --out finetuned --steps 3 --seq 16 --sample 4"),
    ("finetune", "tiny notes.txt --out finetuned-ddp --strategy ddp --steps 2 --seq 16 "
                 "--sample 4"),
    ("compare_strategies", "--auto --hidden 32"),
]
JOB = """
import importlib.util, sys
from pathlib import Path
from mpi4py import MPI

for name, argv in COMMANDS:
    spec = importlib.util.spec_from_file_location(name, Path(ROOT) / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(argv.split())
    MPI.COMM_WORLD.Barrier()   # every rank is done; one prints (two would interleave)
    if MPI.COMM_WORLD.rank == 0:
        print("ran", name, "on", MPI.COMM_WORLD.size, "ranks", flush=True)
"""


@pytest.mark.slow
@needs_mpiexec
def test_documented_commands_under_mpiexec(tmp_path):
    """Each example's documented command, shortened, on 2 real ranks (simulated ranks plan
    every rank at once; real ones each plan alone, a path of its own)."""
    from tests.models.test_pretrained import hf_folder
    hf_folder("gpt2", tmp_path / "tiny", vocab_size=256, n_positions=32)
    (tmp_path / "notes.txt").write_text((ROOT / "docs" / "pretrained.md").read_text())
    (tmp_path / "job.py").write_text(f"COMMANDS = {DOCUMENTED_COMMANDS!r}\nROOT = "
                                     f"{str(ROOT)!r}\n{JOB}")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([str(MPIEXEC), "-n", "2", sys.executable, "job.py"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    ran = [line.split()[1] for line in result.stdout.splitlines()
           if line.startswith("ran ") and line.endswith(" on 2 ranks")]
    assert ran == [name for name, _ in DOCUMENTED_COMMANDS], result.stdout[-2000:]
    assert result.stdout.count("gpt2 fsdp on 2 rank(s)") == 1   # finetune's summary, rank 0
    assert result.stdout.count("gpt2 ddp on 2 rank(s)") == 1
    assert (tmp_path / "finetuned" / "model.safetensors").exists()


# every script of examples/ (a module the scripts import, such as torch_side, has no main)
SCRIPTS = sorted(path.stem for path in (ROOT / "examples").glob("*.py")
                 if "__main__" in path.read_text())


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_shows_every_default(name, capsys):
    module = load_example(name)
    with pytest.raises(SystemExit):
        getattr(module, "parse_args", getattr(module, "main", None))(["--help"])
    text = capsys.readouterr().out.split("options:", 1)[1]
    entries = [entry for entry in re.split(r"\n(?=  -)", text) if entry.strip()]
    # an option that takes a value (its metavar follows it) states its default
    missing = [entry.split()[0] for entry in entries
               if re.match(r"\s*-[-\w]+(, -[-\w]+)* [A-Z{\[]", entry) and "default" not in entry]
    assert not missing, f"{name} --help: no default shown for {missing}"


def test_compare_strategies_columns_line_up():
    module = load_example("compare_strategies")
    table = module.aligned(["preset", "peak/rank plan", "ms/step"],
                           [["single", "510.8/0.0/0.0", "2.20"],
                            ["ddp", "390.5/391.5/391.5", "12.21"]])
    lines = table.splitlines()
    assert len({len(line) for line in lines}) == 1   # right-aligned columns end together
    ends = [{match.end() for match in re.finditer(r"\S+", line)} for line in lines]
    header_ends = {match.end() for match in re.finditer(r"\S+( \S+)*", lines[0])}
    assert all(header_ends - {len("preset")} <= line_ends for line_ends in ends[1:])
    assert all("  " in line for line in lines)   # columns never touch
