"""Sample arrays and their comparison."""
import numpy as np


def sample(dtype, shape, rng):
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        a = rng.integers(0, 2, n).astype(bool)
    elif dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    elif dtype.startswith("complex"):
        a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    else:
        a = (rng.standard_normal(n) * 100).astype(dtype)
    return a.reshape(shape)


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
