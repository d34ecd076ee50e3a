"""Root tables against a stored snapshot, stage by stage.

The snapshot (``tests/fixtures/root_snapshot.npz``) holds, for every case below, the tables
of :func:`gittinseval.core.roots.root_schedule` refined (the default) and on the plain grid
(``refine=False``), recorded on commit 709f67f (before the roots became a package) with

    .venv/bin/python tests/core/roots/test_snapshot.py

Rerun that only for a change meant to move the roots, and say by how much in the commit.

The cases are chains whose stages cross the switch between fine and coarse patch
nodes (``B = 1`` included), batches whose rows take fine and coarse nodes in the same
stage, the 15 MMLU model prices at ``N = 1534, B = 8`` in one call, costs so small that
the grid reaches down to the full-information bound, a partial last batch, and grids
of 65 and 257 points.

Tolerances:

- refined: ``1e-12`` absolute (the roots are in score units).  A fine-node selection off
  by one stage moves roots by about ``2e-7``; rounding does not come near: noise of one
  unit in the last place on every grid expectation moves them by at most ``1.1e-14``.
- plain grid: bit-identical where the floating-point kernels it depends on (torch's FFT,
  ``erfc`` and ``exp``, NumPy's ``exp``, SciPy's ``ndtr``) give the recording machine's
  bits.  Their last bits differ between CPUs and builds, and the plain grid passes them
  on (by up to ``1e-7`` at the tiny cost, where its roots are ill-conditioned), so
  elsewhere it is held to the roots' accuracy target, ``1e-6``.
"""

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.special import ndtr

from gittinseval.core.roots import EmpiricalTargetChain, root_schedule
from gittinseval.core.roots.grid import chain_grids
from gittinseval.core.roots.refined import fine_node_stages
from gittinseval.core.roots.stage_grids import StageGrids

SNAPSHOT = Path(__file__).parents[2] / "fixtures" / "root_snapshot.npz"
REFINED_TOLERANCE = 1e-12
PLAIN_TOLERANCE_ON_OTHER_KERNELS = 1e-6

MMLU_PRICES = 1e-4 * np.array([0.05, 0.03, 0.51, 0.776, 0.6, 1.8, 5.0, 0.6, 0.54, 0.14, 0.2, 0.07, 0.84, 0.11, 1.25])
"""``lambda c_k``: ``1e-4`` times ``load_mmlu("professional_law").prices[::100]``, as in scripts/benchmark_roots.py."""

CASES = {
    # name: (n_examples, batch_size, prior_var, costs per example, grid_points)
    "short_b8": (150, 8, 0.005, [1e-2], 1025),
    "b4": (150, 4, 0.04, [1e-2], 1025),
    "b2": (100, 2, 0.02, [1e-2], 1025),
    "b1": (60, 1, 0.02, [1e-2], 1025),
    "mixed_b1": (100, 1, 0.04, [1e-4, 1e-2], 1025),
    "mixed_b4": (150, 4, 0.02, [1e-5, 1e-3, 1e-2], 1025),
    "partial_last_batch_tiny_cost": (43, 8, 0.04, [1e-9, 1e-2], 1025),
    "tiny_cost": (100, 4, 0.04, [1e-11], 1025),
    "p257": (120, 2, 0.04, [1e-4], 257),
    "p65": (60, 4, 0.04, [1e-4, 1e-2], 65),
    "mmlu_15_prices": (1534, 8, 0.04, MMLU_PRICES.tolist(), 1025),
}


def kernel_fingerprint() -> str:
    """SHA-256 of the library kernels' outputs on fixed inputs (torch's FFT, erfc, exp; NumPy's exp; SciPy's ndtr)."""
    x = np.linspace(-40.0, 12.0, 5003)
    signal = torch.from_numpy(np.sin(np.arange(3000)[None, :] * np.array([[0.37], [1.3]])))
    outputs = [torch.special.erfc(torch.from_numpy(x)), torch.exp(torch.from_numpy(-0.5 * x * x)), np.exp(-0.5 * x * x),
               ndtr(x)]
    for length in (4096, 3000):  # a power of two (the plain grid's) and a 5-smooth length (the refined path's)
        spectrum = torch.fft.rfft(signal, n=length) * torch.fft.rfft(signal.flip(1), n=length)
        outputs.append(torch.fft.irfft(spectrum, n=length))
    digest = hashlib.sha256()
    for output in outputs:
        digest.update(np.asarray(output).tobytes())
    return digest.hexdigest()


def roots_of(name: str, refine: bool) -> np.ndarray:
    n_examples, batch_size, prior_var, costs, grid_points = CASES[name]
    return root_schedule(n_examples, batch_size, prior_var, np.array(costs), grid_points=grid_points, refine=refine)


def record(path: Path = SNAPSHOT) -> None:
    arrays = {"kernel_fingerprint": np.array(kernel_fingerprint())}
    for name in CASES:
        arrays[name] = np.stack([roots_of(name, refine) for refine in (True, False)])  # [2, C, H]: refined, plain
    np.savez_compressed(path, **arrays)
    print(f"{path}: {len(CASES)} cases, {path.stat().st_size / 1e3:.1f} kB")


@pytest.fixture(scope="module")
def snapshot():
    with np.load(SNAPSHOT) as stored:
        return {name: stored[name] for name in stored.files}


def fine_stages(name: str) -> np.ndarray:
    """``[H, C]``: the stages whose patch takes fine nodes, per table."""
    n_examples, batch_size, prior_var, costs, grid_points = CASES[name]
    chain = EmpiricalTargetChain(n_examples, batch_size, prior_var)
    sds, stage_costs = chain.step_sds, np.array(costs)[:, None] * chain.batch_sizes[None, :]
    origin, delta = chain_grids(sds, stage_costs, grid_points)
    return fine_node_stages(sds, StageGrids.plan(origin, delta, sds, stage_costs, grid_points).deltas)


def test_the_cases_cross_the_switch_between_fine_and_coarse_nodes():
    fine = {name: fine_stages(name) for name in CASES}
    crossing = {name for name, stages in fine.items() if np.any(np.diff(stages, axis=0))}
    assert crossing == set(CASES) - {"partial_last_batch_tiny_cost", "tiny_cost"}
    mixed = {name for name, stages in fine.items() if np.any(stages.any(axis=1) & ~stages.all(axis=1))}
    assert mixed == {"mixed_b1", "mixed_b4", "mmlu_15_prices"}


def test_the_snapshot_holds_every_case(snapshot):
    assert set(snapshot) == {"kernel_fingerprint", *CASES}


@pytest.mark.parametrize("name", CASES)
def test_refined_roots_match_the_snapshot(snapshot, name):
    ours, stored = roots_of(name, refine=True), snapshot[name][0]
    assert ours.shape == stored.shape
    gap = np.abs(ours - stored)
    table, stage = np.unravel_index(gap.argmax(), gap.shape)
    assert gap.max() <= REFINED_TOLERANCE, f"table {table}, stage {stage}: the root moved by {gap.max():.3g}"


@pytest.mark.parametrize("name", CASES)
def test_plain_grid_roots_match_the_snapshot(snapshot, name):
    ours, stored = roots_of(name, refine=False), snapshot[name][1]
    if str(snapshot["kernel_fingerprint"]) == kernel_fingerprint():
        np.testing.assert_array_equal(ours, stored)
    else:
        np.testing.assert_allclose(ours, stored, rtol=0, atol=PLAIN_TOLERANCE_ON_OTHER_KERNELS)


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else SNAPSHOT)
