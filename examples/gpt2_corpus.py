"""A byte-level text corpus available offline: this Python's standard library sources.

Files are split into train and held-out by a CRC-32 of their path relative to the
stdlib directory (stable across runs and machines, unlike Python's salted hash()),
so no held-out file is ever seen in training. Reading stops at a byte cap, which
keeps start-up fast. Also: seeded [T, B] batches identical on every rank, fixed
held-out batches, and the add-one-smoothed bigram baseline in nats.
"""

from __future__ import annotations

import os
import sysconfig
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VOCAB = 256                 # bytes
HELDOUT_PERCENT = 10        # share of files kept out of training
SKIPPED_DIRECTORIES = {"site-packages", "dist-packages", "__pycache__"}


@dataclass(frozen=True)
class Corpus:
    train: np.ndarray       # uint8 byte stream of the training files
    heldout: np.ndarray     # uint8 byte stream of the held-out files
    train_files: int
    heldout_files: int


def stdlib_files(root=None) -> list:
    """The stdlib's .py files, sorted by relative path (installed packages excluded)."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    found = []
    for directory, subdirectories, names in os.walk(root):
        # pruned, not filtered: site-packages can hold far more files than the stdlib
        subdirectories[:] = [d for d in subdirectories if d not in SKIPPED_DIRECTORIES]
        found += [Path(directory, name) for name in names if name.endswith(".py")]
    return sorted(found, key=lambda path: path.relative_to(root).as_posix())


def is_heldout(relative: str) -> bool:
    return zlib.crc32(relative.encode()) % 100 < HELDOUT_PERCENT


def load_corpus(max_bytes: int = 4_000_000, root=None) -> Corpus:
    """Train and held-out byte streams; train capped at `max_bytes`, held-out at a tenth."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    caps = {False: max_bytes, True: max(max_bytes // 10, 1)}
    parts, sizes, counts = {False: [], True: []}, {False: 0, True: 0}, {False: 0, True: 0}
    for path in stdlib_files(root):
        split = is_heldout(path.relative_to(root).as_posix())
        if sizes[split] >= caps[split]:
            if all(sizes[s] >= caps[s] for s in caps):
                break
            continue
        data = path.read_bytes()[:caps[split] - sizes[split]]
        parts[split].append(data + b"\n")
        sizes[split] += len(data) + 1
        counts[split] += 1
    streams = {split: np.frombuffer(b"".join(parts[split]), dtype=np.uint8)
               for split in parts}
    for split, name in ((False, "train"), (True, "held-out")):
        if not len(streams[split]):
            raise RuntimeError(f"gpt2_corpus: no {name} .py files under {root}")
    return Corpus(streams[False], streams[True], counts[False], counts[True])


def windows(stream, starts, seq: int):
    """(input ids, next-byte targets), both int64 [seq, len(starts)], F-ordered."""
    offsets = np.asarray(starts)[None, :] + np.arange(seq)[:, None]
    ids = np.asfortranarray(stream[offsets].astype(np.int64))
    return ids, np.asfortranarray(stream[offsets + 1].astype(np.int64))


def train_batch(stream, seed: int, step: int, seq: int, batch: int):
    """The batch of optimizer step `step`: random windows, a pure function of
    (seed, step), so every rank binds the same full batch."""
    rng = np.random.default_rng([seed, step])
    return windows(stream, rng.integers(0, len(stream) - seq - 1, batch), seq)


def heldout_batches(stream, seq: int, batch: int, count: int) -> list:
    """`count` fixed batches of windows spread evenly over the held-out stream."""
    total = count * batch
    starts = np.linspace(0, len(stream) - seq - 2, total).astype(np.int64)
    return [windows(stream, starts[i * batch:(i + 1) * batch], seq) for i in range(count)]


def bigram_log_probs(stream) -> np.ndarray:
    """log p(next | previous) [previous, next] from add-one smoothed counts of `stream`."""
    counts = np.ones((VOCAB, VOCAB))
    np.add.at(counts, (stream[:-1], stream[1:]), 1.0)
    return np.log(counts / counts.sum(axis=1, keepdims=True))


def bigram_loss(log_probs, batches) -> float:
    """Mean cross-entropy in nats of the bigram model on the (ids, targets) of `batches`:
    the very positions the model's held-out loss is measured on."""
    total = count = 0.0
    for ids, targets in batches:
        total -= log_probs[ids, targets].sum()
        count += ids.size
    return float(total / count)


def main(argv=None):
    """What train_gpt2.py would read: files, bytes and the bigram baseline."""
    import argparse

    from nntile_spmd.train.cli import DefaultsHelpFormatter
    parser = argparse.ArgumentParser(description="The corpus examples/train_gpt2.py reads "
                                     "(this module is its library; run that script to train)",
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--corpus-bytes", type=int, default=2_000_000,
                        help="train bytes read (held-out: a tenth)")
    parser.add_argument("--seq", type=int, default=64, help="window length of the baseline")
    args = parser.parse_args(argv)
    corpus = load_corpus(args.corpus_bytes)
    batches = heldout_batches(corpus.heldout, args.seq, 16, 8)
    print(f"train: {len(corpus.train):,} bytes of {corpus.train_files} files; held out: "
          f"{len(corpus.heldout):,} bytes of {corpus.heldout_files} files; bigram baseline "
          f"{bigram_loss(bigram_log_probs(corpus.train), batches):.4f} nats/byte")


if __name__ == "__main__":
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout
    main()
