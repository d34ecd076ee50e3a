"""The LRF tests' shared pieces: test matrices, their :class:`ObservedMatrix`, and a per-member ALS loop."""

import numpy as np
import torch

from gittinseval.baselines.lrf import ObservedMatrix
from gittinseval.core.priors import GaussianPrior

PRIOR = GaussianPrior(0.5, 0.04, "general")


def observed_matrix(values: np.ndarray, observed: np.ndarray) -> ObservedMatrix:
    """The :class:`ObservedMatrix` whose observed cells are ``observed``, with scores from ``values``."""
    matrix = ObservedMatrix(*observed.shape)
    for arm in range(observed.shape[0]):
        examples = np.flatnonzero(observed[arm])
        if examples.size:
            matrix.add(arm, examples, values[arm, examples])
    return matrix


def random_matrix(seed, n_arms=40, n_examples=30, share=0.3):
    rng = np.random.default_rng(seed)
    scores = (rng.uniform(size=(n_arms, n_examples)) < rng.uniform(0.2, 0.8, size=(n_arms, 1))).astype(float)
    observed = rng.uniform(size=scores.shape) < share
    observed[:, 0] = True  # every arm observed, so no arm has an infinite score
    return scores, observed


def numpy_moments(fit):
    return tuple(table.numpy() for table in fit.moments())


def fit_moments(ensemble, scores, observed, generator):
    return numpy_moments(ensemble.fit(observed_matrix(scores, observed), generator))


def looped_als(scores, observed, generator, members, rank, ridge, drop, iterations):
    """Independent members, one ridge solve per member and row/column (float64)."""
    n_arms, n_examples = scores.shape
    u = torch.randn(members, n_arms, rank, generator=generator).double().numpy()
    v = torch.randn(members, n_examples, rank, generator=generator).double().numpy()
    kept = (torch.rand(members, n_arms, n_examples, generator=generator) >= drop).numpy()
    return looped_als_from(scores, observed & kept, u, v, ridge, iterations)


def looped_als_from(scores, masks, u, v, ridge, iterations):
    """ALS of each member ``e`` on the cells ``masks[e]`` from factors ``u, v``; product mean and sd."""
    members, n_arms, rank = u.shape
    n_examples = v.shape[1]
    u, v = u.copy(), v.copy()
    products = []
    for e in range(members):
        mask = masks[e]
        for _ in range(iterations):
            for n in range(n_examples):
                rows = mask[:, n]
                gram = u[e, rows].T @ u[e, rows] + ridge * np.eye(rank)
                v[e, n] = np.linalg.solve(gram, u[e, rows].T @ scores[rows, n])
            for k in range(n_arms):
                cols = mask[k]
                gram = v[e, cols].T @ v[e, cols] + ridge * np.eye(rank)
                u[e, k] = np.linalg.solve(gram, v[e, cols].T @ scores[k, cols])
        products.append(u[e] @ v[e].T)
    products = np.array(products)
    return products.mean(axis=0), products.std(axis=0, ddof=1)


def dropout_mask(fit, matrix):
    """``[E, K, N]`` bool: the cells each member of ``fit`` dropped."""
    mask = torch.zeros(fit.u.shape[0], matrix.shape[0] * matrix.shape[1], dtype=torch.bool)
    mask[fit.dropped_members, matrix.cells[fit.dropped_positions]] = True
    return mask.view(-1, *matrix.shape)
