"""Fixtures of the train tests (helpers live in train_helpers.py)."""

import numpy as np
import pytest
from train_helpers import SAMPLES, SIZES


@pytest.fixture(scope="session")
def data():
    """Random classification data: x (features, samples) fp64, y int64 labels."""
    rng = np.random.default_rng(42)
    x = np.asfortranarray(rng.standard_normal((SIZES[0], SAMPLES)))
    y = rng.integers(0, SIZES[-1], SAMPLES).astype(np.int64)
    return {"x": x, "y": y}
