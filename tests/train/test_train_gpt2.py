"""examples/train_gpt2.py and its corpus: the file split, batches, the bigram
baseline, and a short run on one rank that prints the promised JSON line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nntile_spmd.train import CosineSchedule

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import gpt2_corpus as corpus  # noqa: E402

KEYS = {"strategy", "ranks", "params", "tokens_per_s", "final_train_loss", "heldout_loss",
        "bigram_heldout_loss", "peak_bytes_per_rank", "bytes_sent_per_step"}


@pytest.fixture
def tree(tmp_path):
    """A fake stdlib: 40 small modules, one in site-packages (must be skipped)."""
    for index in range(40):
        folder = tmp_path / ("pkg" if index % 2 else "")
        folder.mkdir(exist_ok=True)
        (folder / f"mod{index}.py").write_text(f"x{index} = {index}\n" * 60)
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "third_party.py").write_text("THIRD PARTY\n" * 100)
    return tmp_path


def test_split_is_by_file_and_deterministic(tree):
    files = [p.relative_to(tree).as_posix() for p in corpus.stdlib_files(tree)]
    assert "site-packages/third_party.py" not in files and len(files) == 40
    heldout = [f for f in files if corpus.is_heldout(f)]
    assert 0 < len(heldout) < len(files)
    text = corpus.load_corpus(10**6, root=tree)
    assert (text.train_files, text.heldout_files) == (40 - len(heldout), len(heldout))
    held, train = bytes(text.heldout), bytes(text.train)
    for name in files:   # every module's text lands in exactly its own split
        module = (tree / name).read_bytes()
        assert (module in held) == (name in heldout) and (module in train) != (name in heldout)
    assert b"THIRD PARTY" not in held + train
    again = corpus.load_corpus(10**6, root=tree)
    assert np.array_equal(again.train, text.train) and np.array_equal(again.heldout,
                                                                      text.heldout)


def test_byte_cap(tree):
    text = corpus.load_corpus(2000, root=tree)
    assert len(text.train) <= 2000 + text.train_files   # one newline per file


def test_batches_are_next_byte_windows_and_a_function_of_seed_and_step():
    stream = np.arange(200, dtype=np.uint8)
    ids, targets = corpus.train_batch(stream, seed=3, step=5, seq=7, batch=4)
    assert ids.shape == targets.shape == (7, 4) and ids.dtype == np.int64
    np.testing.assert_array_equal(targets, ids + 1)
    np.testing.assert_array_equal(np.diff(ids, axis=0), 1)
    again, _ = corpus.train_batch(stream, seed=3, step=5, seq=7, batch=4)
    other, _ = corpus.train_batch(stream, seed=3, step=6, seq=7, batch=4)
    assert np.array_equal(ids, again) and not np.array_equal(ids, other)


def test_bigram_loss_by_hand():
    train = np.array([0, 1, 0, 1, 0, 2], dtype=np.uint8)
    log_probs = corpus.bigram_log_probs(train)
    # after 0: counts 1+2 for "1", 1+1 for "2", 1 for the other 254 bytes
    assert np.exp(log_probs[0, 1]) == pytest.approx(3 / 259)
    assert np.exp(log_probs[5, 9]) == pytest.approx(1 / 256)
    ids, targets = np.array([[0], [1]]), np.array([[1], [0]])
    expected = -(np.log(3 / 259) + np.log(3 / 258)) / 2     # after 1: "0" seen twice of 2
    assert corpus.bigram_loss(log_probs, [(ids, targets)]) == pytest.approx(expected)


def run_example(*arguments, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "examples/train_gpt2.py", *arguments], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=timeout)
    return result


def test_short_run_prints_the_json_line_and_logs(tmp_path):
    log = tmp_path / "log.jsonl"
    result = run_example("--strategy", "single", "--n-layer", "1", "--n-embd", "32",
                         "--n-head", "2", "--seq", "16", "--batch", "4", "--steps", "6",
                         "--warmup", "2", "--lr", "1e-2", "--eval-every", "3",
                         "--eval-batches", "2", "--corpus-bytes", "100000", "--sample", "20",
                         "--no-check", "--no-progress", "--log", str(log))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert KEYS <= set(summary), summary
    assert summary["strategy"] == "single" and summary["ranks"] == 1
    assert summary["final_train_loss"] < summary["first_train_loss"]
    assert 2.0 < summary["bigram_heldout_loss"] < np.log(256)
    assert len(summary["peak_bytes_per_rank"]) == 1 and summary["peak_bytes_per_rank"][0] > 0
    assert summary["bytes_sent_per_step"] == 0 and summary["tokens_per_s"] > 0
    assert "--- sample (20 bytes after 'def ') ---" in result.stdout   # past seq 16
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    steps = [e for e in entries if "loss" in e]
    evaluations = [e for e in entries if "heldout_loss" in e]
    schedule = CosineSchedule(1e-2, total=6, warmup=2, min_lr=1e-3)
    assert [e["lr"] for e in steps] == pytest.approx([schedule(s) for s in range(6)])
    assert [e["step"] for e in evaluations] == [3, 6]
    assert evaluations[-1]["heldout_loss"] == summary["heldout_loss"]


def test_llama_trains_on_the_same_corpus_under_tp_on_two_simulated_ranks():
    result = run_example("--model", "llama", "--strategy", "tp", "--simulate", "2",
                         "--n-layer", "1", "--n-embd", "32", "--n-head", "4", "--n-kv-head", "2",
                         "--seq", "16", "--batch", "4", "--steps", "6", "--warmup", "2",
                         "--lr", "1e-2", "--eval-every", "6", "--eval-batches", "2",
                         "--corpus-bytes", "100000", "--no-check", "--no-progress",
                         "--sample", "4")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["model"] == "llama" and summary["ranks"] == 2
    assert "--- sample (4 bytes after" in result.stdout   # Llama's Generator, 2 ranks
    assert summary["final_train_loss"] < summary["first_train_loss"]
    assert len(summary["peak_bytes_per_rank"]) == 2


def test_the_evaluation_lines_come_between_the_bars_in_a_pipe():
    """stdout and stderr into one pipe, block-buffered (no PYTHONUNBUFFERED): each
    held-out line is on a line of its own, before the bar goes on."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    result = subprocess.run(
        [sys.executable, "examples/train_gpt2.py", "--strategy", "single", "--n-layer", "1",
         "--n-embd", "16", "--n-head", "2", "--seq", "8", "--batch", "2", "--steps", "4",
         "--eval-every", "2", "--eval-batches", "1", "--corpus-bytes", "50000", "--no-check"],
        cwd=ROOT, env=env | {"PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    lines = result.stdout.replace("\r", "\n").splitlines()
    evaluations = [at for at, line in enumerate(lines) if "held-out loss" in line]
    assert [lines[at].split(":")[0] for at in evaluations[:2]] == ["step 2", "step 4"], lines
    assert any("| 3/4 " in line for line in lines[evaluations[0]:evaluations[1]]), lines
    assert all("|" not in lines[at] for at in evaluations), lines   # no bar glued on


TOO_SHORT = ("--strategy", "single", "--n-layer", "1", "--n-embd", "16", "--n-head", "2",
             "--seq", "8", "--batch", "2", "--steps", "1", "--eval-batches", "1",
             "--corpus-bytes", "50000", "--no-progress")


def test_fails_loudly_when_asked_to_beat_the_bigram_and_it_does_not():
    result = run_example(*TOO_SHORT, "--check")
    assert result.returncode == 1 and "does not beat the bigram" in result.stderr


def test_a_short_run_reports_the_bigram_without_failing():
    result = run_example(*TOO_SHORT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "not checked against the baseline" in result.stdout


@pytest.mark.slow
def test_compare_strategies_on_gpt2(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "examples/compare_strategies.py", "--model", "gpt2",
                             "--gpt2", "1,8,2,8", "--batch", "2", "--steps", "2",
                             "--simulate", "2", "--plot", str(tmp_path / "plot.png")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "planned == measured (peak bytes, bytes sent and received, FLOPs, per rank): yes" \
        in result.stdout
    assert "Megatron TP formula" in result.stdout and "loss curves of all presets agree" \
        in result.stdout
