"""The optimizers' formulas: PyTorch's SGD, Adam and AdamW steps, each an Update of
rules.py's language (state tiles updated in place, element by element)."""

from ..rules import SKIP, Update

# PyTorch's Adam and AdamW: moments start at zero (not read at step 1); the bias
# corrections are computed once per step in float64. Adam adds the L2 term to the
# gradient, AdamW decays the parameter first (decay = 1 - lr * weight_decay).
_ADAM_ASSIGN = (
    ("m", "beta1 * m + (1.0 - beta1) * g", (("step == 1.0", "(1.0 - beta1) * g"),)),
    ("v", "beta2 * v + (1.0 - beta2) * g * g", (("step == 1.0", "(1.0 - beta2) * g * g"),)),
    ("param", "param * decay - step_size * m / (sqrt(v) * rsqrt_bias2 + eps)", ()),
)
_BIAS_CORRECTIONS = (("step_size", "lr / (1.0 - pow(beta1, step))"),
                     ("rsqrt_bias2", "1.0 / sqrt(1.0 - pow(beta2, step))"))


def _adam(l2, decay):
    return Update("step", ("grad",), ("param", "m", "v"),
                  ("lr", "beta1", "beta2", "eps", "weight_decay"),
                  (("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8), ("weight_decay", 0.0)),
                  (("l2", l2), ("decay", decay), *_BIAS_CORRECTIONS),
                  (("g", "grad + l2 * param"),), _ADAM_ASSIGN)


UPDATES = {
    "adam_step": _adam("weight_decay", "1.0"),
    "adamw_step": _adam("0.0", "1.0 - lr * weight_decay"),
}

# PyTorch's SGD. Without momentum the velocity is neither read nor written (it may be
# uninitialized); at step 1 it is not read; nesterov (a flag: True is 1.0) adds the
# momentum term to the gradient again.
UPDATES["sgd_step"] = Update(
    "step", ("grad",), ("param", "velocity"),
    ("lr", "momentum", "weight_decay", "dampening", "nesterov"),
    (("momentum", 0.0), ("weight_decay", 0.0), ("dampening", 0.0), ("nesterov", False)),
    (("keep", "1.0 - dampening"),),
    (("g", "grad + weight_decay * param"),),
    (("velocity", "momentum * velocity + keep * g",
      (("momentum == 0.0", SKIP), ("step == 1.0", "g"))),
     ("param", "param - lr * velocity",
      (("momentum == 0.0", "param - lr * g"),
       ("nesterov != 0.0", "param - lr * (g + momentum * velocity)")))))
