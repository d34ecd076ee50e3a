"""Shared test helpers."""

import numpy as np

from gittinseval.data import Benchmark


def binary_benchmark(n_arms: int, n_examples: int, seed: int, prices=(0.5, 1.0, 3.0)) -> Benchmark:
    """A random binary benchmark: arm k answers each example with probability q_k ~ U(0.2, 0.8)."""
    rng = np.random.default_rng(seed)
    quality = rng.uniform(0.2, 0.8, size=n_arms)
    scores = (rng.uniform(size=(n_arms, n_examples)) < quality[:, None]).astype(float)
    return Benchmark("toy", scores, prices=rng.choice(prices, size=n_arms))
