"""UCB-E-LRF: ALS against a per-member loop, parity with banditeval, warm-up and budget."""

import math

import numpy as np
import pytest
import torch
from banditeval.bandits import upper_confidence_bound_exploration_low_rank_factorization as banditeval_step
from banditeval.factorization import Factorization
from scipy import stats

from baselines.lrf import (
    FitDraws,
    LowRankEnsemble,
    LRFPolicy,
    ObservedMatrix,
    _bernoulli_positions,
    _dropped_rows_and_lines,
    _ensemble_moments,
    _partner_indices,
    _subtract_dropped_terms,
)
from gittinseval.core.priors import GaussianPrior
from gittinseval.core.protocol import EvaluationProblem, Request
from gittinseval.data import Benchmark
from gittinseval.sim.simulator import simulate

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


@pytest.mark.parametrize("rank", [1, 2])
def test_independent_members_match_a_per_member_loop(rank):
    scores, observed = random_matrix(0, 12, 9, share=0.5)
    ensemble = LowRankEnsemble(
        rank=rank,
        ensemble_size=4,
        ridge=0.1,
        drop_probability=0.2,
        iterations=5,
        pairing="independent",
        dropout_draws="stream",
    )
    mean, sd = fit_moments(ensemble, scores, observed, torch.Generator().manual_seed(1))
    want_mean, want_sd = looped_als(scores, observed, torch.Generator().manual_seed(1), 4, rank, 0.1, 0.2, 5)
    np.testing.assert_allclose(mean, want_mean, atol=2e-5)
    np.testing.assert_allclose(sd, want_sd, atol=2e-5)


@pytest.mark.parametrize("rank", [1, 2])
def test_reference_pairing_matches_banditeval_factorization(rank):
    scores, observed = random_matrix(1, 70, 45)
    matrix = torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32)
    torch.manual_seed(4)
    reference = Factorization(70, 45, rank, 64, regularizer_weight=0.1, drop_probability=0.05)
    reference.fit(matrix, iterations=10)
    products = reference().double()
    stream = LowRankEnsemble(rank=rank, dropout_draws="stream")
    mean, sd = fit_moments(stream, scores, observed, torch.Generator().manual_seed(4))
    np.testing.assert_allclose(mean, products.mean(0).numpy(), atol=1e-4)
    np.testing.assert_allclose(sd, products.std(0).numpy(), atol=1e-4)
    independent, _ = fit_moments(
        LowRankEnsemble(rank=rank, pairing="independent", dropout_draws="stream"),
        scores,
        observed,
        torch.Generator().manual_seed(4),
    )
    assert np.abs(independent - products.mean(0).numpy()).max() > 1e-3  # the pairing matters


def dropout_mask(fit, matrix):
    """``[E, K, N]`` bool: the cells each member of ``fit`` dropped."""
    mask = torch.zeros(fit.u.shape[0], matrix.shape[0] * matrix.shape[1], dtype=torch.bool)
    mask[fit.dropped_members, matrix.cells[fit.dropped_positions]] = True
    return mask.view(-1, *matrix.shape)


def stream_draws_with(dropped, u, v):
    """Stream-mode draws whose uniforms are 0 on ``dropped [E, K, N]`` and 1 - 2^-24 elsewhere.

    Laid out as :class:`FitDraws` documents: 24-bit words, word ``2j`` in the high and
    ``2j + 1`` in the low half of int64 ``j``.
    """
    members, n_arms, n_examples = dropped.shape
    words = torch.where(dropped.reshape(-1), 0, 2**24 - 1).long()
    if words.numel() % 2:
        words = torch.cat([words, torch.zeros(1, dtype=torch.long)])
    words = words[0::2] << 32 | words[1::2]
    none = torch.zeros(0, dtype=torch.long)
    threshold = math.ceil(float(np.float32(0.05)) * 2**24)
    return FitDraws(u, v, words, threshold, n_arms * n_examples, none, torch.zeros(members, 0, dtype=torch.bool))


@pytest.mark.parametrize("rank", [1, 2])
def test_observed_dropout_fit_equals_the_parity_fit_given_the_same_dropout(rank, monkeypatch):
    """Ours in stream mode and banditeval's Factorization, each given the observed mode's dropout."""
    scores, observed = random_matrix(2, 70, 45)
    matrix = observed_matrix(scores, observed)
    fit = LowRankEnsemble(rank=rank, dropout_draws="observed").fit(matrix, torch.Generator().manual_seed(5))
    dropped = dropout_mask(fit, matrix)
    assert dropped.any() and not (dropped & ~torch.from_numpy(observed)).any()  # observed cells only
    mean, sd = numpy_moments(fit)

    stream = LowRankEnsemble(rank=rank, dropout_draws="stream")
    generator = torch.Generator().manual_seed(5)  # the factors come first, as in the stream
    u, v = torch.randn(64, 70, rank, generator=generator), torch.randn(64, 45, rank, generator=generator)
    parity = stream.fit_drawn(stream_draws_with(dropped, u, v), matrix)
    want_mean, want_sd = numpy_moments(parity)  # the same float32 operations in the same order: bit for bit
    np.testing.assert_array_equal(mean, want_mean)
    np.testing.assert_array_equal(sd, want_sd)

    torch.manual_seed(5)  # the reference draws U, V from the global generator, then the dropout uniforms
    reference = Factorization(70, 45, rank, 64, regularizer_weight=0.1, drop_probability=0.05)
    monkeypatch.setattr(torch, "rand_like", lambda x: torch.where(dropped, 0.0, 1.0))
    reference.fit(torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32), iterations=10)
    products = reference().double()
    np.testing.assert_allclose(mean, products.mean(0).numpy(), atol=1e-4)
    np.testing.assert_allclose(sd, products.std(0).numpy(), atol=1e-4)


def test_observed_dropout_keeps_each_cell_independently_with_the_keep_probability():
    """At a fixed seed, with E M = 1.9 million (member, cell) pairs; every check at p-value 1e-6."""
    scores, observed = random_matrix(3, 400, 150, share=0.5)
    matrix = observed_matrix(scores, observed)
    ensemble = LowRankEnsemble(drop_probability=0.05, iterations=1)
    generator = torch.Generator().manual_seed(0)
    first, second = (dropout_mask(ensemble.fit(matrix, generator), matrix) for _ in range(2))
    assert not (first | second)[:, ~torch.from_numpy(observed)].any()
    first, second = (mask.view(64, -1)[:, matrix.cells].double() for mask in (first, second))
    drops = first  # [E, M], cells in observation order
    members, cells = drops.shape
    # Keep rate: the dropped pairs are Binomial(E M, p).
    low, high = stats.binom.interval(1 - 1e-6, members * cells, 0.05)
    assert low <= drops.sum() <= high
    # Each member's count, and each cell's count over the members, binomial with the same p:
    # chi-square sums of the standardised counts (a shared or cell-dependent dropout inflates them).
    for counts, trials in ((drops.sum(1), cells), (drops.sum(0), members)):
        chi2 = float((((counts - trials * 0.05) ** 2) / (trials * 0.05 * 0.95)).sum())
        assert stats.chi2.sf(chi2, counts.numel()) > 1e-6 and stats.chi2.cdf(chi2, counts.numel()) > 1e-6
    # Pairwise independence: correlations between members, between successive cells of a
    # member, and between one fit's dropout and the next's are N(0, 1/n) for n pairs.
    between_members = torch.corrcoef(drops)[np.triu_indices(members, 1)]
    successive = torch.corrcoef(torch.stack([drops[:, :-1].reshape(-1), drops[:, 1:].reshape(-1)]))[0, 1]
    next_fit = torch.corrcoef(torch.stack([first.reshape(-1), second.reshape(-1)]))[0, 1]
    bound = stats.norm.isf(1e-6 / 2 / between_members.numel())
    assert between_members.abs().max() * math.sqrt(cells) < bound
    assert abs(successive) * math.sqrt(members * cells) < stats.norm.isf(1e-6 / 2)
    assert abs(next_fit) * math.sqrt(members * cells) < stats.norm.isf(1e-6 / 2)


def test_dropout_positions_are_one_sequence_of_geometric_gaps_whatever_the_chunks():
    """The gaps come in chunks of the expected count plus one sd: some of these calls take several."""
    for seed in range(200):
        got = _bernoulli_positions(300, 0.1, torch.Generator().manual_seed(seed))
        gaps = torch.empty(3000, dtype=torch.float64).geometric_(0.1, generator=torch.Generator().manual_seed(seed))
        successes = gaps.cumsum(0) - 1  # trial positions from 0
        assert torch.equal(got, successes[successes < 300].long())
    assert _bernoulli_positions(0, 0.1, torch.Generator()).numel() == 0
    assert _bernoulli_positions(50, 0.0, torch.Generator()).numel() == 0


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("rank", [1, 2])
def test_dropped_terms_are_subtracted_to_the_bit_as_a_gather_and_scatter_adds_would(rank, index_dtype):
    """The compiled pass against the torch ops it replaced.  Many pairs share each of
    few lines, with terms of mixed magnitudes, so that any other order of the float32
    additions gives other sums (checked, so that the test can tell)."""
    generator = torch.Generator().manual_seed(rank)
    n_fixed, n_lines, n_pairs = 40, 3, 600
    fixed = torch.randn(n_fixed * rank, generator=generator) * 10 ** torch.empty(n_fixed * rank).uniform_(
        -3, 3, generator=generator
    )
    fixed_rows = torch.randint(n_fixed, (n_pairs,), generator=generator)
    solved_lines = torch.randint(n_lines, (n_pairs,), generator=generator)
    negated_scores = -torch.rand(n_pairs, generator=generator)
    gram = torch.randn(n_lines * rank * rank, generator=generator)
    target = torch.randn(n_lines * rank, generator=generator)

    def by_scatter(order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dropped = fixed.view(-1, rank)[fixed_rows[order]]
        lines = solved_lines[order]
        gram_index = (lines[:, None] * rank * rank + torch.arange(rank * rank)).view(-1)
        target_index = (lines[:, None] * rank + torch.arange(rank)).view(-1)
        outer = (dropped[:, :, None] * dropped[:, None, :]).view(-1).neg_()
        return (
            gram.clone().scatter_add_(0, gram_index, outer),
            target.clone().scatter_add_(0, target_index, (dropped * negated_scores[order, None]).view(-1)),
        )

    expected = by_scatter(torch.arange(n_pairs))
    got = gram.clone(), target.clone()
    rows, lines = fixed_rows.numpy().astype(index_dtype), solved_lines.numpy().astype(index_dtype)
    _subtract_dropped_terms(got[0].numpy(), got[1].numpy(), fixed.numpy(), rows, lines, negated_scores.numpy(), rank)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    reordered = by_scatter(torch.randperm(n_pairs, generator=generator))
    assert not torch.equal(reordered[0], expected[0]) and not torch.equal(reordered[1], expected[1])


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
    _dropped_rows_and_lines(
        rows, lines, dropped_members.numpy(), fixed_index.numpy(), solved_index.numpy(), partner_rows.numpy(), members
    )
    partner = (dropped_members * n_solved + solved_index) % members if pairing == "reference" else dropped_members
    np.testing.assert_array_equal(lines, solved_index * members + dropped_members)
    np.testing.assert_array_equal(rows, fixed_index * members + partner)


def test_ensemble_moments_match_the_explicit_products():
    generator = torch.Generator().manual_seed(0)
    u, v = torch.randn(7, 5, 3, generator=generator).double(), torch.randn(7, 4, 3, generator=generator).double()
    products = torch.bmm(u, v.transpose(1, 2))
    mean, sd = _ensemble_moments(u, v)
    np.testing.assert_allclose(mean.numpy(), products.mean(0).numpy(), atol=1e-12)
    np.testing.assert_allclose(sd.numpy(), products.std(0).numpy(), atol=1e-10)


def test_observed_row_sums_are_the_masked_row_sums():
    scores, observed = random_matrix(8, 30, 20)
    matrix = observed_matrix(scores, observed)
    tables = torch.randn(2, 30, 20, dtype=torch.float64)
    for table, got in zip(tables, matrix.observed_row_sums(*tables), strict=True):
        np.testing.assert_allclose(got.numpy(), (table.numpy() * observed).sum(axis=1), atol=1e-12)


def fed_policy(scores, observed, seed, **kwargs):
    n_arms, n_examples = scores.shape
    policy = LRFPolicy(**kwargs)
    problem = EvaluationProblem(n_examples, np.ones(n_arms), float(n_arms * n_examples), binary=False)
    policy.reset(problem, np.random.default_rng(0))
    policy.warmup.clear()
    for arm in range(n_arms):
        examples = np.flatnonzero(observed[arm])
        policy.observe(Request(arm, examples), scores[arm, examples])
    policy.generator = torch.Generator().manual_seed(seed)
    return policy


@pytest.mark.parametrize("seed", range(4))
def test_step_matches_banditeval_with_the_same_random_state(seed):
    scores, observed = random_matrix(10 + seed, 60, 40)
    policy = fed_policy(scores, observed, seed, batch_size=8, ensemble=LowRankEnsemble(dropout_draws="stream"))
    matrix = torch.tensor(np.where(observed, scores, np.nan), dtype=torch.float32)
    torch.manual_seed(seed)
    batch, mus = banditeval_step(matrix, batch_size=8, return_mus=True)
    request = policy.select()
    assert request.arm == int(batch[0, 0])
    assert sorted(request.examples.tolist()) == sorted(batch[1].tolist())
    np.testing.assert_allclose(policy.imputed_sums / 40, mus.numpy(), atol=1e-5)


def test_arm_scores_match_an_independent_ucb_computation():
    scores, observed = random_matrix(3, 50, 30)
    policy = fed_policy(scores, observed, 9, eta=2.0)
    arm_scores, mean, sd = policy.arm_scores()
    want, _ = fit_moments(LowRankEnsemble(), scores, observed, torch.Generator().manual_seed(9))
    np.testing.assert_allclose(mean, want)
    cell = [[scores[k, n] if observed[k, n] else mean[k, n] + 2.0 * sd[k, n] for n in range(30)] for k in range(50)]
    expected = np.mean(cell, axis=1)
    np.testing.assert_allclose(arm_scores, expected)


def test_warmup_is_five_percent_of_cells_one_request_per_arm_and_no_fit():
    n_arms, n_examples = 30, 40
    scores = np.random.default_rng(0).uniform(size=(n_arms, n_examples))
    policy = LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(ensemble_size=4))
    problem = EvaluationProblem(n_examples, np.ones(n_arms), 0.1 * n_arms * n_examples, binary=False)
    policy.reset(problem, np.random.default_rng(2))
    warmup = list(policy.warmup)
    assert sum(r.size for r in warmup) == math.ceil(0.05 * n_arms * n_examples)
    assert len({r.arm for r in warmup}) == len(warmup)
    for _ in warmup:
        request = policy.select()
        policy.observe(request, scores[request.arm, request.examples])
        assert policy.fit_mean is None
        observed_means = np.where(policy.stats.counts > 0, policy.stats.means, -np.inf)
        assert policy.recommend() == int(np.argmax(observed_means))
    request = policy.select()
    assert policy.fit_mean is not None and request.size == 4
    imputed = np.where(policy.matrix.observed, policy.matrix.values, policy.fit_mean).mean(axis=1)
    policy.observe(request, scores[request.arm, request.examples])
    imputed[request.arm] = np.where(policy.matrix.observed, policy.matrix.values, policy.fit_mean)[request.arm].mean()
    assert policy.recommend() == int(np.argmax(imputed))


def test_a_cell_observed_twice_is_an_error():
    matrix = ObservedMatrix(3, 5)
    matrix.add(1, np.array([0, 4]), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"arm 1: examples observed twice \(\[4\]\)"):
        matrix.add(1, np.array([2, 4]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="arm 2: examples observed twice"):
        matrix.add(2, np.array([3, 3]), np.array([1.0, 1.0]))


def test_a_matrix_of_two_to_the_31_cells_is_refused_before_any_allocation():
    problem = EvaluationProblem(2**15, np.ones(2**16), 1.0, binary=True)
    with pytest.raises(ValueError, match=r"K x N must be below 2\*\*31, got 65536 x 32768"):
        LRFPolicy().reset(problem, np.random.default_rng(0))


def test_bad_hyperparameters_are_named():
    with pytest.raises(ValueError, match="pairing"):
        LowRankEnsemble(pairing="shuffled")
    with pytest.raises(ValueError, match=r"dropout_draws must be one of \('stream', 'observed'\), got 'all'"):
        LowRankEnsemble(dropout_draws="all")
    with pytest.raises(ValueError, match="ensemble_size"):
        LowRankEnsemble(ensemble_size=1)
    with pytest.raises(ValueError, match="warmup_fraction"):
        LRFPolicy(warmup_fraction=0.0)
    with pytest.raises(ValueError, match="warm_start_iterations"):
        LRFPolicy(warm_start=True, warm_start_iterations=0)
    with pytest.raises(ValueError, match="warm_start must be true or false"):
        LRFPolicy(warm_start="yes")


@pytest.mark.parametrize(("drop", "members", "shape"), [(0.05, 5, (30, 100)), (0.1, 3, (31, 97)), (0.5, 4, (7, 9))])
def test_dropout_reads_the_reference_uniforms_from_the_same_words(drop, members, shape):
    """Odd word counts included: the words are drawn two at a time."""
    n_cells = shape[0] * shape[1]
    cells = torch.from_numpy(np.random.default_rng(0).choice(n_cells, n_cells // 4, replace=False))  # observed order
    ours, reference = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    known = cells[: len(cells) // 2]  # read as the words are drawn; the rest read afterwards
    draws = LowRankEnsemble(ensemble_size=members, drop_probability=drop).draw(*shape, ours, known)
    got_members, got_at = draws.dropout_of(cells)
    assert torch.equal(draws.u, torch.randn(members, shape[0], 1, generator=reference))
    assert torch.equal(draws.v, torch.randn(members, shape[1], 1, generator=reference))
    uniforms = torch.rand(members, n_cells, generator=reference)
    want_members, want_at = (uniforms < drop)[:, cells].nonzero(as_tuple=True)  # by member, then observation
    assert torch.equal(got_members, want_members) and torch.equal(got_at, want_at) and want_at.numel()
    reordered = cells.flip(0)  # does not extend the known cells: every word is read afterwards
    want_members, want_at = (uniforms < drop)[:, reordered].nonzero(as_tuple=True)
    got_members, got_at = draws.dropout_of(reordered)
    assert torch.equal(got_members, want_members) and torch.equal(got_at, want_at)
    assert torch.equal(torch.rand(4, generator=ours), torch.rand(4, generator=reference))  # same words consumed


def test_draws_made_ahead_give_the_same_run_as_draws_made_in_turn(monkeypatch):
    """The parity policy draws the next fit's random numbers on another thread: same stream, same run."""
    scores, _ = random_matrix(8, 30, 40)
    bench = Benchmark("lrf-ahead", scores)

    class InTurn:
        def __init__(self, ensemble, matrix, generator):
            self.draw = lambda: ensemble.draw(*matrix.shape, generator)

        def take(self):
            return self.draw()

    def stream_policy():
        return LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(dropout_draws="stream"))

    ahead = simulate(bench, stream_policy(), np.ones(30), PRIOR, budget_fraction=0.3, seed=2)
    monkeypatch.setattr("baselines.lrf._DrawsAhead", InTurn)
    in_turn = simulate(bench, stream_policy(), np.ones(30), PRIOR, budget_fraction=0.3, seed=2)
    for column in ("arm", "recommended"):
        np.testing.assert_array_equal(ahead.trace[column], in_turn.trace[column])
    assert len(ahead.trace["arm"]) > 30  # past the warm-up


@pytest.mark.parametrize("rank", [1, 2])
def test_warm_refit_matches_a_per_member_loop_from_the_previous_factors(rank):
    scores, everything = random_matrix(5, 12, 9, share=0.6)
    rng = np.random.default_rng(6)
    before = everything & (rng.uniform(size=everything.shape) < 0.7)
    before[:, 0] = True
    ensemble = LowRankEnsemble(rank=rank, ensemble_size=4, drop_probability=0.2, iterations=5, pairing="independent")
    matrix = observed_matrix(scores, before)
    previous = ensemble.fit(matrix, torch.Generator().manual_seed(1))
    new_cells = []
    for arm in range(12):
        examples = np.flatnonzero(everything[arm] & ~before[arm])
        matrix.add(arm, examples, scores[arm, examples])
        new_cells += [(arm, n) for n in examples]
    refit = ensemble.refit(previous, matrix, torch.Generator().manual_seed(3), iterations=3)
    # Each member's mask: its old dropout (read from the previous fit) plus a fresh
    # draw for the new cells, in the order they were added.
    masks = np.repeat(everything[None], 4, axis=0)
    previous_cells = matrix.cells[previous.dropped_positions]
    for member, cell in zip(previous.dropped_members.tolist(), previous_cells.tolist(), strict=True):
        masks[member, cell // 9, cell % 9] = False
    fresh = torch.rand(4, len(new_cells), generator=torch.Generator().manual_seed(3)).numpy() < 0.2
    for member, position in zip(*np.nonzero(fresh), strict=True):
        masks[member][new_cells[position]] = False
    assert fresh.any()
    want_mean, want_sd = looped_als_from(
        scores, masks, previous.u.double().numpy(), previous.v.double().numpy(), 0.1, 3
    )
    mean, sd = numpy_moments(refit)
    np.testing.assert_allclose(mean, want_mean, atol=2e-5)
    np.testing.assert_allclose(sd, want_sd, atol=2e-5)


def small_benchmark():
    rng = np.random.default_rng(11)
    scores = (rng.uniform(size=(16, 60)) < rng.uniform(0.2, 0.8, size=(16, 1))).astype(float)
    return Benchmark("synthetic", scores, prices=np.ones(16), default_batch_size=4)


def small_lrf(warm_start):
    return LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(ensemble_size=8), warm_start=warm_start)


def test_warm_start_is_deterministic_per_seed_and_keeps_the_protocol():
    bench = small_benchmark()
    costs = np.ones(16)
    first, again, other = (simulate(bench, small_lrf(True), costs, PRIOR, seed=s) for s in (3, 3, 4))
    for key in ("arm", "batch_size", "recommended", "cost"):
        np.testing.assert_array_equal(first.trace[key], again.trace[key])
    assert not np.array_equal(first.trace["arm"], other.trace["arm"])
    spend, budget = first.trace["cost"], first.summary["budget"]
    assert np.all(spend[:-1] < budget) and spend[-1] >= budget
    assert first.summary["hyperparameters"]["warm_start"] is True
    # The warm-up and the first (cold) fit are the parity run's; warm starts change what follows.
    parity = simulate(bench, small_lrf(False), costs, PRIOR, seed=3)
    first_fitted = int(np.searchsorted(np.cumsum(parity.trace["batch_size"]), math.ceil(0.05 * 16 * 60))) + 1
    np.testing.assert_array_equal(first.trace["arm"][: first_fitted + 1], parity.trace["arm"][: first_fitted + 1])
    assert not np.array_equal(first.trace["arm"], parity.trace["arm"])


def test_observed_dropout_runs_are_deterministic_per_seed():
    bench = small_benchmark()
    policies = [LRFPolicy(batch_size=4, ensemble=LowRankEnsemble(ensemble_size=8)) for _ in range(3)]
    first, again, other = (
        simulate(bench, policy, np.ones(16), PRIOR, budget_fraction=0.4, seed=s)
        for policy, s in zip(policies, (3, 3, 4), strict=True)
    )
    assert all(policy.draws_ahead is None for policy in policies)  # the default mode draws no stream
    for key in ("arm", "batch_size", "recommended", "cost"):
        np.testing.assert_array_equal(first.trace[key], again.trace[key])
    assert not np.array_equal(first.trace["arm"], other.trace["arm"])
    assert len(first.trace["arm"]) > 16 + 60  # at most one warm-up request per arm, then fitted steps


@pytest.mark.parametrize("warm_start", [False, True])
def test_recommendation_is_the_argmax_of_observed_cells_filled_by_the_latest_fit(warm_start):
    n_arms, n_examples = 20, 30
    scores = np.random.default_rng(5).uniform(size=(n_arms, n_examples))  # continuous: no exact ties
    policy = LRFPolicy(batch_size=3, ensemble=LowRankEnsemble(ensemble_size=6), warm_start=warm_start)
    problem = EvaluationProblem(n_examples, np.ones(n_arms), 0.5 * n_arms * n_examples, binary=False)
    policy.reset(problem, np.random.default_rng(1))
    seen = np.zeros((n_arms, n_examples), dtype=bool)
    fitted_steps = 0
    for _ in range(80):
        request = policy.select()
        policy.observe(request, scores[request.arm, request.examples])
        seen[request.arm, request.examples] = True
        if policy.fit is None:
            counts = seen.sum(axis=1)
            imputed = np.where(counts > 0, (scores * seen).sum(axis=1) / np.maximum(counts, 1), -np.inf)
        else:
            fitted_steps += 1
            u, v = policy.fit.u.double(), policy.fit.v.double()
            fill = torch.bmm(u, v.transpose(1, 2)).mean(0).numpy()
            imputed = np.where(seen, scores, fill).mean(axis=1)
        assert imputed[policy.recommend()] >= imputed.max() - 1e-9
    assert fitted_steps >= 50


def test_completed_arms_with_equal_sums_stay_tied_for_the_priority_to_decide():
    """Binary scores make exact ties among completed arms; rounding must not break them."""
    n_examples = 545
    rng = np.random.default_rng(2)
    scores = np.zeros((6, n_examples))
    for arm in (1, 4):  # completed, the same 309 right answers in different places
        scores[arm, rng.permutation(n_examples)[:309]] = 1.0
    observed = np.zeros_like(scores, dtype=bool)
    observed[[1, 4]] = True
    observed[[0, 2, 3, 5], :40] = True  # partial arms, all wrong
    policy = fed_policy(scores, observed, 3, batch_size=4)
    policy.select()
    completed = policy.stats.counts == n_examples
    np.testing.assert_array_equal(policy.imputed_sums[completed], policy.stats.sums[completed])
    assert policy.recommend() == min((1, 4), key=lambda arm: policy.priority[arm])
    arm = 1 + 4 - policy.recommend()
    policy.priority[[1, 4]] = policy.priority[[4, 1]]
    assert policy.recommend() == arm


def test_scores_added_to_the_matrix_are_copied():
    matrix = ObservedMatrix(2, 5)
    scores = np.array([0.5, 1.0], dtype=np.float32)
    matrix.add(0, np.array([1, 3]), scores)
    scores[:] = 0.0
    np.testing.assert_array_equal(matrix.observations(torch.arange(2))[2].numpy(), [0.5, 1.0])


def test_moments_into_given_tables_equal_fresh_ones_and_are_overwritten_by_the_next_fit():
    scores, observed = random_matrix(11, 20, 15)
    matrix = observed_matrix(scores, observed)
    ensemble = LowRankEnsemble(ensemble_size=5)
    tables = tuple(torch.empty(20, 15, dtype=torch.float64) for _ in range(2))
    first = ensemble.fit(matrix, torch.Generator().manual_seed(1))
    mean, sd = first.moments(out=tables)
    assert mean.data_ptr() == tables[0].data_ptr() and sd.data_ptr() == tables[1].data_ptr()
    fresh_mean, fresh_sd = first.moments()
    torch.testing.assert_close(mean, fresh_mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(sd, fresh_sd, rtol=0, atol=1e-12)
    second = ensemble.fit(matrix, torch.Generator().manual_seed(2)).moments(out=tables)
    torch.testing.assert_close(tables[0], second[0].clone(), rtol=0, atol=0)
    assert (tables[0] - fresh_mean).abs().max() > 1e-6  # the first fit's mean is gone from the tables


def test_observed_row_sums_over_requests_added_out_of_order():
    """Several requests per arm, arms interleaved, examples unsorted: the merged cells sum as a mask would."""
    rng = np.random.default_rng(12)
    matrix = ObservedMatrix(7, 25)
    mask = np.zeros((7, 25), dtype=bool)
    for _ in range(30):
        arm = int(rng.integers(7))
        unseen = np.flatnonzero(~mask[arm])
        if unseen.size:
            examples = rng.permutation(unseen)[: int(rng.integers(1, 5))]
            matrix.add(arm, examples, rng.uniform(size=examples.size))
            mask[arm, examples] = True
    table = torch.randn(7, 25, dtype=torch.float64)
    (got,) = matrix.observed_row_sums(table)
    np.testing.assert_allclose(got.numpy(), (table.numpy() * mask).sum(axis=1), atol=1e-12)


@pytest.mark.parametrize("shape", [(1, 12), (9, 1)])
def test_a_single_arm_or_a_single_example_runs_to_the_budget(shape):
    scores = np.random.default_rng(3).uniform(size=shape)
    batch_size = min(2, shape[1])
    bench = Benchmark("lrf-thin", scores, prices=np.ones(shape[0]), default_batch_size=batch_size)
    policy = LRFPolicy(batch_size=batch_size, ensemble=LowRankEnsemble(ensemble_size=4))
    result = simulate(bench, policy, np.ones(shape[0]), PRIOR, budget_fraction=0.6, seed=0)
    assert policy.fit is not None  # past the warm-up: the fit ran on the thin matrix
    assert result.trace["cost"][-1] >= 0.6 * scores.size and np.all(np.asarray(result.trace["regret"]) >= 0)
