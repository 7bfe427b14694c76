"""Train layer: Trainer, a compile-once training loop over a model graph.

One optimizer step = k micro-batches of execute(phases=forward+backward), whose
gradients add up in the persistent gradient tensors, then execute(phases=optimizer)
(k = 1 runs everything in one execute). Imports graph, runtime public API and the
search (distribution="auto"); no mpi4py.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import warnings

import numpy as np
from tqdm import tqdm

from .. import search
from ..graph.dtypes import storage_dtype
from ..graph.scalars import DROPOUT_ON, DROPOUT_STEP
from ..runtime import compile as compile_graph
from ..models.optimizer import add_optimizer
from ..runtime.consistency import check_same_on_all_ranks
from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .data import BatchView, batch_indices, bind_local
from .metrics import accuracy, cross_entropy_numpy
from .resume import CheckpointPolicy

TRAIN_PHASES = ("forward", "backward")


class Trainer:
    """Adds an optimizer to `model.graph`, compiles it once and runs training steps.

    `model` needs .graph, .params, .grads, .loss, .inputs, .batch, .micro_batch,
    .accumulation and, for evaluate(), .forward_model(batch) and .logits (models.MLP).
    `comm`, `tiling`, `distribution` and `compile_args` go to nt.compile unchanged.
    With distribution="auto" (compile_args may hold `memory_budget` and `machine`),
    the search's first candidate is compiled and `chosen` holds it; evaluation graphs
    compile with its distribution and tiling, not a new search.
    `lr_schedule(step) -> lr` (0-based optimizer step), if given, sets the optimizer's
    runtime scalar "lr" before every step (no recompiling; see train/schedule.py).
    With `checkpoint_every` N, fit() saves into `checkpoint_dir`/step-NNNNNNNN every N
    steps and keeps the `keep_last` newest; resume() continues from the latest.
    With `skip_nonfinite`, a step whose loss is NaN or Inf changes nothing: the optimizer
    phase runs in its own execute after the loss is read, and is skipped (gradients
    zeroed, parameters and optimizer state as they were) with a warning.
    `history` keeps the newest `history_limit` step records (a few hundred bytes each),
    so a long run's memory stays flat; `log_path` gets every record.
    """

    def __init__(self, model, optimizer: str = "adam", comm=None, distribution="single",
                 tiling=None, seed: int = 0, log_path=None, progress: bool = True,
                 compile_args=None, lr_schedule=None, checkpoint_dir=None,
                 checkpoint_every: int = 0, keep_last=None, skip_nonfinite: bool = False,
                 history_limit: int = 10_000, **hyper):
        self.model, self.seed, self.progress = model, seed, progress
        self.skip_nonfinite = bool(skip_nonfinite)
        self.skipped = []              # steps skipped for a non-finite loss
        self.lr_schedule = lr_schedule
        self.comm, self.tiling, self.distribution = comm, tiling, distribution
        self.compile_args = dict(compile_args or {})
        self.checkpoints = CheckpointPolicy(checkpoint_dir, checkpoint_every, keep_last)
        self.optimizer = add_optimizer(model.graph, model.params, model.grads, optimizer,
                                       **hyper)
        self.chosen = None             # autoplan's candidate, with distribution="auto"
        self.cg = self.compile_training(model.graph)
        self.world = self.cg.world
        self.rank = self.world.rank
        self.step = 0                  # optimizer steps done
        self.history = []              # one record per step: step, loss, step_time_ms
        self.history_limit = history_limit
        self.log_file = open(log_path, "a") if log_path and self.rank == 0 else None
        self._eval = {}                # eval batch size -> (forward-only model, its graph)

    def compile_training(self, graph):
        if not search.auto_compile.is_auto(self.distribution):
            return compile_graph(graph, comm=self.comm, tiling=self.tiling,
                                 distribution=self.distribution, **self.compile_args)
        cg, self.chosen = search.compile_chosen(graph, self.comm, tiling=self.tiling,
                                                **self.compile_args)
        self.distribution, self.tiling = self.chosen.distribution, self.chosen.tiling
        self.compile_args = {**{name: value for name, value in self.compile_args.items()
                                if name not in ("machine", "memory_budget")},
                             **({"memory_budget": self.chosen.memory_budget}
                                if self.chosen.offload else {})}
        return cg

    # -- parameters ----------------------------------------------------------------
    def bind_params(self, params: dict):
        """Bind initial values {name: full array} for every parameter (collective)."""
        missing = set(self.model_param_names()) - set(params)
        if missing:
            raise KeyError(f"bind_params: no value for parameter(s) {sorted(missing)}")
        for name in self.model_param_names():
            self.cg.bind_data(name, params[name])

    def model_param_names(self) -> list:
        return [p.name for p in self.model.params]

    def get_params(self) -> dict:
        """The current parameters as whole NumPy arrays on every rank (collective)."""
        return {name: self.cg.get_output(name) for name in self.model_param_names()}

    # -- one step --------------------------------------------------------------------
    def train_step(self, micro_batches) -> float:
        """One optimizer step over `micro_batches` (a list of k dicts name -> array
        indexable by tile slices); returns the loss of the whole batch."""
        micro_batches = list(micro_batches)
        if len(micro_batches) != self.model.accumulation:
            raise ValueError(f"train_step: got {len(micro_batches)} micro-batches, the model "
                             f"was built for accumulation={self.model.accumulation}")
        start = time.perf_counter()
        lr = self.apply_lr_schedule()
        self.cg.context = f" (training step {self.step + 1})"   # named by timeout errors
        with self.dropout_on():
            loss = self.run_step(micro_batches)
        self.step += 1
        self.record(loss, (time.perf_counter() - start) * 1e3, lr)
        return loss

    @contextlib.contextmanager
    def dropout_on(self):
        """A model built with dropout drops during this step's executes only, with the
        masks of this step's number (a resumed run draws the same ones again)."""
        names = self.cg.scalar_names()
        if DROPOUT_ON not in names:
            yield
            return
        self.cg.set_scalar(DROPOUT_STEP, self.step)
        self.cg.set_scalar(DROPOUT_ON, 1.0)
        try:
            yield
        finally:
            self.cg.set_scalar(DROPOUT_ON, 0.0)

    def run_step(self, micro_batches) -> float:
        """The executes of one optimizer step; the loss of the whole batch."""
        loss = 0.0
        # the optimizer runs apart when the loss must be seen first (one execute otherwise)
        apart = len(micro_batches) > 1 or self.skip_nonfinite
        for batch in micro_batches:
            for name in self.model.inputs:
                bind_local(self.cg, name, batch[name])
            self.cg.execute(phases=TRAIN_PHASES if apart else None)
            # a 0-d loss: replicated under ddp/fsdp/tp, so this read moves no data there
            loss += float(self.cg.get_output(self.model.loss.name))
        if apart and self.skip_nonfinite and not math.isfinite(loss):
            self.skip_step(loss)     # the loss is replicated: every rank skips alike
        elif apart:
            self.cg.execute(phases="optimizer")
        return loss

    def skip_step(self, loss):
        """Leave parameters and optimizer state as they are; zero the gradients the
        skipped optimizer phase would have cleared (they accumulate across steps)."""
        for gradient in self.model.grads:
            self.cg.bind_data(gradient.name, np.zeros(gradient.shape,
                                                      storage_dtype(gradient.dtype)))
        self.skipped.append(self.step + 1)
        warnings.warn(f"training step {self.step + 1}: the loss is {loss}; the optimizer "
                      "step is skipped (parameters and optimizer state unchanged)",
                      RuntimeWarning, stacklevel=3)

    def apply_lr_schedule(self):
        """Set "lr" for the coming step from lr_schedule; the rate used (None: no schedule)."""
        if self.lr_schedule is None:
            return None
        lr = float(self.lr_schedule(self.step))
        self.cg.set_scalar(self.optimizer.scalars["lr"], lr)
        return lr

    def record(self, loss, step_time_ms, lr=None):
        entry = {"step": self.step, "loss": loss, "step_time_ms": round(step_time_ms, 3)}
        if lr is not None:
            entry["lr"] = lr
        self.history.append(entry)
        if len(self.history) > self.history_limit:
            del self.history[0]
        if self.log_file is not None:
            self.log_file.write(json.dumps(entry) + "\n")
            self.log_file.flush()

    def micro_batches(self, data: dict, step: int) -> list:
        """The k micro-batches of global step `step`: seeded order, same on every rank."""
        count = next(iter(data.values())).shape[-1]
        indices = batch_indices(self.seed, step, self.model.batch, count)
        micro = self.model.micro_batch
        return [{name: BatchView(data[name], indices[i * micro:(i + 1) * micro])
                 for name in self.model.inputs} for i in range(self.model.accumulation)]

    def fit(self, data: dict, steps: int, log_every: int = 10) -> list:
        """Run `steps` optimizer steps on `data` {input name: array, samples trailing};
        returns the per-step losses. Resumes the data order from self.step."""
        bar = tqdm(total=steps, desc=f"train[{self.distribution}]", leave=False,
                   disable=not (self.progress and self.rank == 0))
        check_same_on_all_ranks(self.world, "fit: the seed and the dataset shapes",
                                (self.seed, {name: array.shape for name, array in data.items()}))
        losses = []
        for _ in range(steps):
            losses.append(self.train_step(self.micro_batches(data, self.step)))
            self.checkpoints.after_step(self)
            if self.step % log_every == 0 or len(losses) == steps:
                bar.set_postfix(loss=f"{losses[-1]:.4f}")
            bar.update(1)
        bar.close()
        return losses

    # -- evaluation ----------------------------------------------------------------------
    def evaluate(self, x, y) -> dict:
        """Accuracy and mean cross-entropy of the current parameters on (x, y), run by a
        forward-only graph of batch len(y) under the same preset (collective)."""
        count = int(np.asarray(y).shape[-1])
        model, cg = self.eval_graph(count)
        for name, value in self.get_params().items():
            cg.bind_data(name, value)
        bind_local(cg, model.x.name, np.asarray(x))
        bind_local(cg, model.y.name, np.asarray(y))
        cg.execute()
        logits = cg.get_output(model.logits.name)
        return {"accuracy": accuracy(logits, y),
                "loss": cross_entropy_numpy(logits, y, 1.0 / count),
                "logits": logits}

    def eval_graph(self, count: int):
        if count not in self._eval:
            model = self.model.forward_model(count)
            model.logits.mark_output()
            cg = compile_graph(model.graph, comm=self.comm, tiling=self.tiling,
                               distribution=self.distribution, **self.compile_args)
            self._eval[count] = (model, cg)
        return self._eval[count]

    # -- checkpoints ------------------------------------------------------------------------
    def save(self, directory):
        """Checkpoint parameters, optimizer state, the step and the RNG state."""
        save_checkpoint(self.cg, directory, step=self.step, extra=self.rng_state())

    def rng_state(self) -> dict:
        """All the randomness of training to come: the data order is a pure function of
        (seed, step) (train.data), and initialization is spent: its result is in the
        parameters; dropout masks are a pure function of (site, step)."""
        return {"seed": self.seed, "rng": {"data_order": "batch_indices(seed, step)",
                                           "step": self.step}}

    def load(self, directory, step=None):
        """Restore a checkpoint written by save() (any rank count or preset), including
        the seed, so training continues bit-for-bit as if never interrupted."""
        manifest = load_checkpoint(self.cg, directory, step=step)
        self.step = int(manifest.get("step") or 0)
        self.seed = int(manifest.get("extra", {}).get("seed", self.seed))
        return manifest

    def resume(self, path=None):
        """Load `path`, or the latest complete checkpoint in checkpoint_dir that verifies
        (an older one, with a warning, when the newest fails); returns its manifest, or
        None (nothing to resume: a fresh start). Collective."""
        failures = []
        for chosen in self.checkpoints.candidates(self.world, path):
            try:
                manifest = self.load(chosen)
            except CheckpointError as error:   # raised on every rank alike: all go on
                if path is not None:
                    raise
                failures.append(f"{chosen}: {error}")
                warnings.warn(f"resume: skipping checkpoint {chosen}, it fails verification "
                              f"({error}); trying the one before it", RuntimeWarning,
                              stacklevel=2)
                continue
            return manifest
        if failures:
            raise CheckpointError("resume: no checkpoint under "
                                  f"{self.checkpoints.root} verifies: " + "; ".join(failures))
        return None

    def close(self):
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None
