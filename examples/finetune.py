"""Fine-tune a local Hugging Face GPT-2 or Llama folder on a local text file, any preset;
save a folder transformers loads; sample from it.

    mpiexec -n 2 python examples/finetune.py MODEL_FOLDER notes.txt --out finetuned
    python examples/finetune.py MODEL_FOLDER notes.txt --strategy tp --simulate 2

The folder's config.json says which model it is. Text becomes ids with the folder's
tokenizer.json, or its vocab.json + merges.txt (byte-level BPE), read with the
`tokenizers` package (pip install tokenizers); a folder with no tokenizer file reads
text byte by byte (then the vocabulary must have at least 256 entries). Every rank
binds the same batches (windows of the text at seeded offsets); AdamW. After training,
rank 0 writes --out (config.json, model.safetensors, the tokenizer files copied) and
the run checks that the saved weights are bitwise the trained ones, then samples
--sample tokens after --prompt from the saved folder with gpt2/llama.Generator.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

import nntile_spmd as nt
from nntile_spmd.models import gpt2, llama
from nntile_spmd.models.pretrained import read_weights
from nntile_spmd.models.text_codec import TokenizerError, load_text_codec
from nntile_spmd.train import Trainer
from nntile_spmd.train.cli import DefaultsHelpFormatter

FAMILIES = {"gpt2": (gpt2, gpt2.GPT2Config, gpt2.build_gpt2),
            "llama": (llama, llama.LlamaConfig, llama.build_llama),
            "mistral": (llama, llama.LlamaConfig, llama.build_llama)}   # Llama + a window
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.json", "merges.txt", "generation_config.json")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("folder", help="a local HF model folder (config.json + safetensors)")
    parser.add_argument("text", help="a UTF-8 text file to fine-tune on")
    parser.add_argument("--out", default="finetuned", help="the folder to write")
    parser.add_argument("--strategy", choices=("single", "ddp", "fsdp", "tp"), default="fsdp")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64, help="tokens per window")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--dtype", choices=("fp32", "fp64"), default="fp32")
    parser.add_argument("--prompt", default="The ")
    parser.add_argument("--sample", type=int, default=32, help="tokens to sample after")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dropout", action="store_true",
                        help="train with the folder config's dropout (*_pdrop, "
                             "attention_dropout)")
    parser.add_argument("--simulate", type=int, default=0, metavar="N",
                        help="run N simulated ranks in this process instead of MPI")
    return parser.parse_args(argv)


def windows(ids, batch, seq, rng) -> dict:
    """A batch of seq + 1 consecutive ids at seeded offsets: inputs and next tokens [T, B]."""
    starts = rng.integers(0, len(ids) - seq - 1, size=batch)
    window = np.stack([ids[s:s + seq + 1] for s in starts], axis=1)
    return {"input_ids": np.asfortranarray(window[:-1]),
            "targets": np.asfortranarray(window[1:])}


def main(argv=None):
    args = parse_args(argv)
    family = json.loads((Path(args.folder) / "config.json").read_text()).get("model_type")
    if family not in FAMILIES:
        raise SystemExit(f"{args.folder}: model_type {family!r}, expected one of "
                         f"{sorted(FAMILIES)}")
    module, config_class, build = FAMILIES[family]
    cfg = config_class.from_pretrained(args.folder)
    try:   # before any training: a folder's text read with the wrong ids is lost work
        codec = load_text_codec(args.folder, cfg.vocab_size)
    except TokenizerError as error:
        raise SystemExit(str(error)) from None
    ids = codec.encode(Path(args.text).read_text())
    if len(ids) <= args.seq + 1:
        raise SystemExit(f"{args.text}: {len(ids)} tokens, need more than --seq + 1")
    comm = nt.SimulatedWorld(args.simulate) if args.simulate else None
    model = build(cfg, batch=args.batch, seq=args.seq, dtype=args.dtype, dropout=args.dropout)
    trainer = Trainer(model, "adamw", comm=comm, distribution=args.strategy, lr=args.lr,
                      progress=False)
    model.load_pretrained(trainer.cg, args.folder)
    rng = np.random.default_rng(args.seed)
    losses = [trainer.train_step([windows(ids, args.batch, args.seq, rng)])
              for _ in range(args.steps)]
    model.save_pretrained(trainer.cg, args.out)
    trained = model.hf_state_dict(trainer.cg)
    if trainer.rank == 0:
        for name in TOKENIZER_FILES:   # the saved folder stays usable on its own
            if (Path(args.folder) / name).is_file():
                shutil.copy(Path(args.folder) / name, Path(args.out) / name)
    saved = read_weights(args.out)
    wrong = [name for name in saved if not np.array_equal(saved[name], trained[name])]
    prompt = codec.encode(args.prompt)[:, None]
    length = min(len(prompt) + args.sample, getattr(cfg, "n_positions", None)
                 or cfg.max_position_embeddings)
    generator = module.Generator(cfg, args.out, batch=1, max_length=length, dtype=args.dtype,
                                 comm=comm, distribution=args.strategy)
    sample = generator.generate(prompt, length - len(prompt), do_sample=True,
                                temperature=0.8, top_k=40, seed=args.seed)[:, 0]
    if trainer.rank == 0:
        print(f"{family} {args.strategy} on {trainer.world.size} rank(s): loss "
              f"{losses[0]:.4f} -> {losses[-1]:.4f} in {args.steps} steps; saved {args.out}")
        print(f"--- sample ---\n{codec.decode(sample)}\n---")
    if wrong:
        raise SystemExit(f"FAILED: {args.out} holds other weights than trained: {wrong[:3]}")


if __name__ == "__main__":
    main()
