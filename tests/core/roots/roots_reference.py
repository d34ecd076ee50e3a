"""Independent references for the root tests: SciPy's normal, quadrature, the extended interpolant."""

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm


def ei(z, sigma):
    """``EI_sigma(z) = E[(z + sigma Z)_+]`` from SciPy's normal cdf and pdf."""
    return z * norm.cdf(z / sigma) + sigma * norm.pdf(z / sigma)


def extended_linear(x, grid, values):
    """The piecewise-linear W on the grid, slope 0 on the left and 1 on the right."""
    inside = np.interp(x, grid, values)
    return np.where(x > grid[-1], values[-1] + (x - grid[-1]), inside)


def normal_quadrature(n_nodes: int = 1601, width: float = 8.0):
    """Trapezoidal nodes and weights of the standard normal on [-width, width]."""
    z = np.linspace(-width, width, n_nodes)
    weights = norm.pdf(z) * (z[1] - z[0])
    weights[[0, -1]] /= 2
    return z, weights / weights.sum()


def full_information_root(sd, cost):
    """``x`` with ``EI_sd(x) = cost``, by Brent's method on SciPy's normal pdf and cdf."""
    return brentq(lambda x: ei(x, sd) - cost, -60.0 * sd, max(cost, sd), xtol=1e-15 * sd)
