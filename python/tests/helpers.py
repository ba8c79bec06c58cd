"""Paths and inputs shared by the tests (fixtures are in conftest.py)."""
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS_ONNX = os.path.join(REPO, "models", "digits", "digits_cnn.onnx")


def ramp(shape, dtype=np.float32, offset=0):
    """Deterministic, input-specific values: (i + offset) % 97 / 97."""
    n = int(np.prod(shape))
    return ((np.arange(n) + offset) % 97 / 97.0).astype(dtype).reshape(shape)
