"""One side of the ALS: each dropped pair reads its line's partner row of the fixed factor."""

import numpy as np
import pytest
import torch

from gittinseval.baselines.lrf.als import _partner_indices
from gittinseval.baselines.lrf.compiled import dropped_rows_and_lines


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("pairing", ["reference", "independent"])
def test_dropped_pairs_read_the_partner_row_of_their_line(pairing, index_dtype):
    members, n_solved, n_fixed = 5, 7, 9
    partner_rows, _ = _partner_indices(pairing, members, 1, n_solved)
    generator = torch.Generator().manual_seed(0)
    dropped_members = torch.randint(members, (50,), generator=generator)
    fixed_index = torch.randint(n_fixed, (50,), generator=generator)
    solved_index = torch.randint(n_solved, (50,), generator=generator)
    rows, lines = np.empty(50, index_dtype), np.empty(50, index_dtype)
    dropped_rows_and_lines(
        rows, lines, dropped_members.numpy(), fixed_index.numpy(), solved_index.numpy(), partner_rows.numpy(), members
    )
    partner = (dropped_members * n_solved + solved_index) % members if pairing == "reference" else dropped_members
    np.testing.assert_array_equal(lines, solved_index * members + dropped_members)
    np.testing.assert_array_equal(rows, fixed_index * members + partner)
