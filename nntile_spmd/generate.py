"""Generate text from a local Hugging Face GPT-2, Llama or Mistral folder, on every rank of the job:
    mpiexec -n 2 python -m nntile_spmd.generate FOLDER --prompt "def hello" \\
        [--max-new-tokens N] [--distribution tp]

The folder's config.json says which model it is; its tokenizer (models/text_codec.py:
tokenizer.json, or vocab.json + merges.txt, else bytes) turns the prompt into ids and
the ids back into text. Greedy by default, as transformers' generate(do_sample=False);
--do-sample draws with --temperature and --top-k from a generator seeded by --seed
(the same tokens on every rank). Generation stops at the config's eos_token_id (or the
first of its list) when it has one. Rank 0 prints the prompt and its continuation.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .models import gpt2, llama
from .models.text_codec import TokenizerError, load_text_codec
from .runtime import SimulatedWorld
from .train.cli import DefaultsHelpFormatter

FAMILIES = {"gpt2": (gpt2, gpt2.GPT2Config), "llama": (llama, llama.LlamaConfig),
            "mistral": (llama, llama.LlamaConfig)}   # Llama, its window checked by the config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nntile_spmd.generate",
                                     description=__doc__.split("\n")[0],
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("folder", help="a local HF model folder (config.json + safetensors)")
    parser.add_argument("--prompt", required=True, help="the text to continue")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--distribution", choices=("single", "ddp", "fsdp", "tp"),
                        default="single")
    parser.add_argument("--dtype", choices=("fp32", "fp64"), default="fp32")
    parser.add_argument("--do-sample", action="store_true", help="sample instead of greedy")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--simulate", type=int, default=0, metavar="N",
                        help="run N simulated ranks in this process instead of MPI")
    return parser.parse_args(argv)


def model_family(folder):
    """(model module, config class) named by the folder's config.json."""
    config = Path(folder) / "config.json"
    if not config.is_file():
        raise SystemExit(f"{folder}: no config.json (a local Hugging Face model folder is "
                         "expected; nothing is downloaded)")
    family = json.loads(config.read_text()).get("model_type")
    if family not in FAMILIES:
        raise SystemExit(f"{config}: model_type {family!r}, expected one of {sorted(FAMILIES)}")
    return FAMILIES[family]


def generate(args) -> tuple:
    """(prompt ids, generated ids, codec, rank) of the command line `args`."""
    module, config_class = model_family(args.folder)
    cfg = config_class.from_pretrained(args.folder)
    try:
        codec = load_text_codec(args.folder, cfg.vocab_size)
    except TokenizerError as error:
        raise SystemExit(str(error)) from None
    prompt = codec.encode(args.prompt)
    limit = getattr(cfg, "n_positions", None) or cfg.max_position_embeddings
    if not 1 <= len(prompt) < limit or args.max_new_tokens < 1:
        raise SystemExit(f"--prompt: {len(prompt)} tokens and --max-new-tokens "
                         f"{args.max_new_tokens}: need 1 <= prompt tokens < {limit} "
                         "(the model's positions) and at least one new token")
    new_tokens = min(args.max_new_tokens, limit - len(prompt))
    eos = json.loads((Path(args.folder) / "config.json").read_text()).get("eos_token_id")
    stops = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    comm = SimulatedWorld(args.simulate) if args.simulate else None
    generator = module.Generator(cfg, args.folder, batch=1, max_length=len(prompt) + new_tokens,
                                 dtype=args.dtype, comm=comm, distribution=args.distribution)
    tokens = generator.generate([prompt], new_tokens, do_sample=args.do_sample,
                                temperature=args.temperature, top_k=args.top_k,
                                seed=args.seed,
                                eos_token_id=eos if isinstance(eos, int) else None)[0]
    for position in range(len(prompt), len(tokens)):   # several EOS ids: cut at the first
        if int(tokens[position]) in stops:
            tokens = tokens[:position + 1]
            break
    return prompt, tokens, codec, generator.cg.world.rank


def main(argv=None):
    prompt, tokens, codec, rank = generate(parse_args(argv))
    if rank == 0:
        print(codec.decode(tokens), flush=True)


if __name__ == "__main__":
    main()
