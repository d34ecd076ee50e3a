"""The caches that a process's runs share, and clearing them all (gittinseval/utils/caches.py)."""

import numpy as np

from gittinseval.utils.caches import clear_run_shared_caches, run_shared_cache


def test_a_run_shared_cache_caches_until_cleared_and_the_values_come_back_equal():
    calls = []

    @run_shared_cache(maxsize=4)
    def square(x):
        calls.append(x)
        return x * x

    assert [square(3), square(3), square(4)] == [9, 9, 16] and calls == [3, 4]
    clear_run_shared_caches()
    assert square.cache_info().currsize == 0
    assert square(3) == 9 and calls == [3, 4, 3]


def test_clearing_empties_the_root_tables_and_lrf_s_partner_indices_which_are_then_rebuilt_equal():
    from gittinseval.baselines.lrf import als
    from gittinseval.core.roots import (
        completed_root_table,
        cost_grid,
        hermite,
        interpolated_root_schedule,
        patch,
        root_schedule,
    )

    costs = np.array([3e-4, 1.1e-3])
    interpolated = interpolated_root_schedule(60, 3, 0.02, costs)
    completed = completed_root_table(60, 3, 0.02, tuple(costs), 0.25, 1025, True)
    partners = als._partner_indices("reference", 8, 1, 30)[0].clone()
    caches = (completed_root_table, cost_grid._grid_table, hermite.padded_bases, patch._strided_offsets,
              als._partner_indices)
    assert all(cache.cache_info().currsize > 0 for cache in caches)
    clear_run_shared_caches()
    assert all(cache.cache_info().currsize == 0 for cache in caches)
    np.testing.assert_array_equal(interpolated_root_schedule(60, 3, 0.02, costs), interpolated)
    np.testing.assert_array_equal(completed_root_table(60, 3, 0.02, tuple(costs), 0.25, 1025, True), completed)
    np.testing.assert_array_equal(completed[:, :-1], root_schedule(60, 3, 0.02, costs))
    assert np.all(completed[:, -1] == 0)
    assert (als._partner_indices("reference", 8, 1, 30)[0] == partners).all()
