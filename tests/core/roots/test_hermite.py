"""Quintic Hermite interpolation (gittinseval.core.roots.hermite) against polynomials it must reproduce."""

import numpy as np
import pytest

from gittinseval.core.roots.hermite import hermite_cells, padded_bases, quintic_hermite


def test_quintic_hermite_reproduces_quintics():
    rng = np.random.default_rng(3)
    coefficients = rng.normal(size=(2, 6))
    ends = np.sort(rng.uniform(-1, 1, size=(2, 4)), axis=1)
    polys = [np.poly1d(c) for c in coefficients]
    value, slope, curvature = (np.stack([p.deriv(k)(e) for p, e in zip(polys, ends, strict=True)]) for k in range(3))
    ours = quintic_hermite(ends, value, slope, curvature, 5)
    for row, p in enumerate(polys):
        cells = zip(ends[row, :-1], ends[row, 1:], strict=True)
        nodes = np.concatenate([np.linspace(a, b, 6)[:-1] for a, b in cells] + [ends[row, -1:]])
        np.testing.assert_allclose(ours[row], p(nodes), rtol=0, atol=1e-12)


def test_the_error_on_a_smooth_function_falls_as_the_sixth_power_of_the_interval():
    # Matching value, slope and curvature at both ends leaves an error of order h^6.
    errors = []
    for n_cells in (8, 16):
        ends = np.linspace(0.0, 2.0, n_cells + 1)[None, :]
        value, slope, curvature = np.sin(ends), np.cos(ends), -np.sin(ends)
        inside = quintic_hermite(ends, value, slope, curvature, 7)
        nodes = np.linspace(0.0, 2.0, 7 * n_cells + 1)
        errors.append(np.abs(inside[0] - np.sin(nodes)).max())
    assert errors[1] < 1e-8 and errors[0] / errors[1] == pytest.approx(64.0, rel=0.25)


def test_padded_bases_give_each_row_its_own_stride():
    # Rows of strides 2 and 5 in one product equal each row interpolated alone, the padding aside.
    rng = np.random.default_rng(4)
    ends = np.sort(rng.uniform(0, 3, size=(2, 5)), axis=1)
    value, slope, curvature = rng.normal(size=(3, 2, 5))
    bases = padded_bases((2, 5))
    assert bases.shape == (2, 6, 5) and not bases.flags.writeable
    assert padded_bases((2, 5)) is bases  # cached
    cells = hermite_cells(ends, value, slope, curvature, bases)  # [2, 4, 5]
    for row, stride in enumerate((2, 5)):
        alone = quintic_hermite(ends[row : row + 1], value[row : row + 1], slope[row : row + 1],
                                curvature[row : row + 1], stride)[0]
        np.testing.assert_allclose(cells[row, :, :stride].reshape(-1), alone[:-1], rtol=0, atol=1e-12)
    # At t = 0 each cell starts at its left end's value.
    np.testing.assert_allclose(cells[:, :, 0], value[:, :-1], rtol=0, atol=1e-14)
