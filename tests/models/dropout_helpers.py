"""A tiny fp64 GPT-2 or Llama trained a few steps with dropout, the runs the dropout tests
compare (one process, simulated worlds, real MPI ranks)."""

import numpy as np

import nntile_spmd as nt
from nntile_spmd.models import gpt2, llama
from nntile_spmd.train import Trainer

# high rates, so that every site drops something at these sizes
GPT2 = gpt2.GPT2Config(vocab_size=32, n_positions=12, n_embd=16, n_layer=2, n_head=2,
                       embd_pdrop=0.2, attn_pdrop=0.3, resid_pdrop=0.25)
LLAMA = llama.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=24,
                          num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=12, attention_dropout=0.3)
BUILD = {"gpt2": (GPT2, gpt2.build_gpt2), "llama": (LLAMA, llama.build_llama)}
SEQ, BATCH = 12, 3


def batch():
    ids = np.random.default_rng(1).integers(0, 32, (SEQ, BATCH))
    return {"input_ids": ids, "targets": np.roll(ids, -1, axis=0)}


def train(family="gpt2", dropout=True, steps=2, comm=None, distribution="single",
          tiles=None, **build_options):
    """(training losses, the loss of a forward-only execute after them, the trainer)."""
    cfg, build = BUILD[family]
    model = build(cfg, batch=BATCH, seq=SEQ, dtype="fp64", dropout=dropout, **build_options)
    tiling = None if tiles is None else nt.TilingStrategy.manual(tiles)
    trainer = Trainer(model, "adamw", comm=comm, distribution=distribution, tiling=tiling,
                      lr=1e-2)
    values = model.init_params(np.random.default_rng(0))
    trainer.bind_params(values)
    for name in model.constants:
        trainer.cg.bind_data(name, values[name])
    losses = [trainer.train_step([batch()]) for _ in range(steps)]
    for name, value in batch().items():
        trainer.cg.bind_data(name, value)
    trainer.cg.execute(phases="forward")
    return losses, float(trainer.cg.get_output("loss")), trainer
