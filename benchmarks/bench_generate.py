"""Generation speed: gpt2.Generator (the key/value-cache decode graph) against
transformers' generate (use_cache=True) on the same weights, the same cores, greedy.

Builds a random GPT-2 of the given size with transformers, saves it to a temp folder,
then times both generating --new tokens after a --prompt-token prompt for --batch
sequences (after one warm-up each, the fastest of --repeats calls); prints tokens/s of
each (batch x new tokens over the wall time of generate), and checks that both gave the same tokens.

    PYTHONPATH=. python benchmarks/bench_generate.py [--embd 256 --layers 4 --new 32]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch
import transformers

from nntile_spmd.models import gpt2


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--embd", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--new", type=int, default=32, help="generated tokens")
    parser.add_argument("--dtype", choices=("fp32", "fp64"), default="fp32")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls; the fastest")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="torch.set_num_threads (0: torch's default)")
    return parser.parse_args()


def timed(generate, repeats):
    """(tokens, the fastest of `repeats` timed calls): on a shared machine the fastest
    is the one least disturbed by other processes."""
    generate()   # warm-up: numba's and torch's first calls
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = generate()
        times.append(time.perf_counter() - start)
    return tokens, min(times)


def main():
    args = parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    length = args.prompt + args.new
    torch.manual_seed(0)
    torch_dtype = torch.float64 if args.dtype == "fp64" else torch.float32
    config = transformers.GPT2Config(vocab_size=args.vocab, n_positions=length,
                                     n_embd=args.embd, n_layer=args.layers, n_head=args.heads,
                                     bos_token_id=None, eos_token_id=None)
    hf = transformers.GPT2LMHeadModel(config).to(torch_dtype).eval()
    prompt = np.random.default_rng(0).integers(0, args.vocab, (args.prompt, args.batch))
    with tempfile.TemporaryDirectory() as folder:
        hf.save_pretrained(folder)
        ours = gpt2.Generator(gpt2.GPT2Config.from_pretrained(folder), folder,
                              batch=args.batch, max_length=length, dtype=args.dtype)
    theirs_ids = torch.from_numpy(prompt.T.copy())
    with torch.no_grad():
        theirs, theirs_s = timed(lambda: hf.generate(
            theirs_ids, max_new_tokens=args.new, do_sample=False,
            use_cache=True).numpy().T, args.repeats)
    mine, mine_s = timed(lambda: ours.generate(prompt, max_new_tokens=args.new), args.repeats)
    tokens = args.batch * args.new
    print(f"GPT-2 n_embd={args.embd} n_layer={args.layers} vocab={args.vocab} {args.dtype}, "
          f"batch {args.batch}, prompt {args.prompt}, {args.new} new tokens, "
          f"torch threads {torch.get_num_threads()}")
    print(f"transformers generate: {tokens / theirs_s:8.1f} tokens/s ({theirs_s:.3f} s)")
    print(f"gpt2.Generator:        {tokens / mine_s:8.1f} tokens/s ({mine_s:.3f} s)")
    print(f"same tokens: {np.array_equal(mine, theirs)}")


if __name__ == "__main__":
    main()
