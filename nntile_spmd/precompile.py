"""Compile the CPU kernels ahead of time, in parallel, into numba's on-disk cache:
    python -m nntile_spmd.precompile [--workers N]

A cold run (empty cache) otherwise compiles every numba kernel the first step calls, one
after the other, inside that step. The signatures are those the examples' and tests'
models call (GPT-2, Llama and the MLP in fp32 and fp64), recorded into
numba_signatures.pkl by `--record`, which runs those models small; each worker compiles
its share of the kernels into the cache (NUMBA_CACHE_DIR when set), so the next process
loads them instead of compiling. A signature this numba cannot read back is compiled by
running the models instead (slower, one process).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pickle
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

MANIFEST = Path(__file__).with_name("numba_signatures.pkl")
KERNEL_PACKAGE = "nntile_kernels"


def dispatchers() -> dict:
    """{(module, name): numba dispatcher} of every CPU kernel module's jitted functions."""
    from numba.core.registry import CPUDispatcher
    found = {}
    package = importlib.import_module(KERNEL_PACKAGE)
    for path in sorted(Path(package.__file__).parent.glob("cpu*.py")):
        module = importlib.import_module(f"{KERNEL_PACKAGE}.{path.stem}")
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.__module__ == module.__name__:
                found[(module.__name__, name)] = value
    return found


def run_models() -> None:
    """One training step of each model the examples and tests build, small, fp32 and fp64:
    every kernel signature they call gets compiled (and cached)."""
    import numpy as np

    from .models import build_mlp, gpt2, llama
    from .train import Trainer

    gpt2_cfg = gpt2.GPT2Config(vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    llama_cfg = llama.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=24,
                                  num_hidden_layers=1, num_attention_heads=4,
                                  num_key_value_heads=2, max_position_embeddings=16)
    ids = np.random.default_rng(0).integers(0, 32, (16, 3))
    for dtype in ("fp32", "fp64"):
        for model in (gpt2.build_gpt2(gpt2_cfg, batch=3, seq=16, dtype=dtype),
                      llama.build_llama(llama_cfg, batch=3, seq=16, dtype=dtype)):
            trainer = Trainer(model, "adamw", lr=1e-3)
            values = model.init_params(np.random.default_rng(0))
            trainer.bind_params(values)
            for name in model.constants:
                trainer.cg.bind_data(name, values[name])
            trainer.train_step([{"input_ids": ids, "targets": np.roll(ids, -1, axis=0)}])
        mlp = build_mlp([8, 16, 4], batch=6, dtype=dtype)
        trainer = Trainer(mlp, "adam", lr=1e-3)
        trainer.bind_params(mlp.init_params(np.random.default_rng(0)))
        x = np.random.default_rng(1).standard_normal((8, 6)).astype(f"float{dtype[2:]}")
        trainer.train_step([{"x": x, "y": np.arange(6) % 4}])


def record(path=MANIFEST) -> int:
    """Run the models and write every compiled signature to `path`; their count."""
    run_models()
    entries = [(module, name, signature) for (module, name), dispatcher in dispatchers().items()
               for signature in dispatcher.signatures]
    path.write_bytes(pickle.dumps(entries))
    return len(entries)


def record_cold(path=MANIFEST) -> int:
    """record() in a process of its own over an empty numba cache: numba registers the
    signature of a helper that a loop calls only when it compiles the loop, so a record
    over a warm cache leaves the helpers out, and a cold first step (CI's) would then
    compile them outside the manifest."""
    code = f"from pathlib import Path\nfrom nntile_spmd.precompile import record\n" \
           f"print(record(Path({str(path)!r})))"
    root = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache,
                   PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                text=True, check=True)
    return int(result.stdout.split()[-1])


def compile_share(entries) -> int:
    """Compile (module, name, signature) entries in this process (a pool worker)."""
    for module, name, signature in entries:
        getattr(importlib.import_module(module), name).compile(signature)
    return len(entries)


def shares(entries, workers) -> list:
    """The entries split into `workers` lists, whole functions each (a function's
    signatures share one cache index file), larger functions spread first."""
    by_function = {}
    for entry in entries:
        by_function.setdefault(entry[:2], []).append(entry)
    lists = [[] for _ in range(workers)]
    for group in sorted(by_function.values(), key=len, reverse=True):
        min(lists, key=len).extend(group)
    return [share for share in lists if share]


def of_dtypes(entries, dtypes) -> list:
    """The entries whose float array arguments hold one of `dtypes` ("fp32", "fp64"), and
    those with none (integer ids)."""
    wanted = {f"float{dtype[2:]}" for dtype in dtypes}
    floats = [{str(t.dtype) for t in entry[2] if str(getattr(t, "dtype", "")).startswith(
        "float")} for entry in entries]
    return [entry for entry, found in zip(entries, floats) if not found or found & wanted]


def precompile(workers=None, dtypes=("fp32", "fp64")) -> tuple:
    """(signatures compiled, how): from the manifest in `workers` processes, else by
    running the models here."""
    try:
        entries = pickle.loads(MANIFEST.read_bytes())
        known = dispatchers()
        entries = of_dtypes([entry for entry in entries if entry[:2] in known], dtypes)
    except Exception as error:   # noqa: BLE001 - another numba or a damaged file: run them
        print(f"precompile: {MANIFEST.name} unreadable ({type(error).__name__}: {error}); "
              "running the models instead", file=sys.stderr)
        run_models()
        return sum(len(d.signatures) for d in dispatchers().values()), "ran the models"
    workers = workers or len(os.sched_getaffinity(0))
    with ProcessPoolExecutor(workers) as pool:
        done = sum(pool.map(compile_share, shares(entries, workers)))
    return done, f"{workers} worker process(es)"


def serial_timings(dtypes) -> list:
    """(seconds, module.function) of compiling each manifest signature of `dtypes` here,
    one after the other, slowest first: where a cold first step's time goes (a function's
    time includes the helpers it calls that were not compiled yet)."""
    import numba  # noqa: F401 - imported first, so that no entry pays for it
    times = []
    for module, name, signature in of_dtypes(pickle.loads(MANIFEST.read_bytes()), dtypes):
        dispatcher = getattr(importlib.import_module(module), name)
        start = time.perf_counter()
        dispatcher.compile(signature)
        times.append((time.perf_counter() - start, f"{module}.{name}"))
    return sorted(times, reverse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nntile_spmd.precompile",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=0,
                        help="processes compiling at once (default: the usable cores)")
    parser.add_argument("--dtype", nargs="+", choices=("fp32", "fp64"),
                        default=["fp32", "fp64"],
                        help="the kernels of these dtypes (the examples train in fp32, "
                             "the tests mostly in fp64) (default: fp32 fp64)")
    parser.add_argument("--record", action="store_true",
                        help=f"run the models and rewrite {MANIFEST.name} (after changing "
                             "a kernel)")
    parser.add_argument("--serial-timings", action="store_true",
                        help="compile one signature at a time here and print each one's "
                             "time (on an empty NUMBA_CACHE_DIR: what a cold step spends)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.serial_timings:
        times = serial_timings(args.dtype)
        for seconds, function in times:
            print(f"{seconds:7.2f} s  {function}")
        print(f"{sum(seconds for seconds, _ in times):7.2f} s  in all")
        return
    if args.record:
        print(f"recorded {record_cold()} signatures into {MANIFEST}")
        return
    count, how = precompile(args.workers or None, args.dtype)
    print(f"compiled {count} kernel signatures into numba's cache with {how} in "
          f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
