"""GSM8K/PIQA: the stand-ins hit the known facts; the BanditEval readers round-trip."""

import csv
import pickle

import numpy as np
import pytest

from gittinseval.data import load_gsm8k, load_piqa, read_banditeval_matrix
from gittinseval.data._files import data_file
from gittinseval.data.banditeval import MAX_TOKENS, PROMPTS, TEMPERATURES, stand_in_accuracies

SEEDS = range(1, 6)


@pytest.mark.parametrize("seed", SEEDS)
def test_gsm8k_stand_in_hits_the_known_facts(seed):
    benchmark = load_gsm8k(seed)
    means = benchmark.row_means
    assert benchmark.scores.shape == (122, 1000) and benchmark.binary and benchmark.stand_in
    assert np.flatnonzero(means == means.max()).tolist() == [106]
    assert means[106] == pytest.approx(0.413, abs=1e-12)
    assert means[1] == pytest.approx(0.021, abs=1e-12)
    assert means.mean() == pytest.approx(0.111, abs=0.003)


@pytest.mark.parametrize("seed", SEEDS)
def test_piqa_stand_in_hits_the_known_facts(seed):
    benchmark = load_piqa(seed)
    means = benchmark.row_means
    assert benchmark.scores.shape == (103, 1000) and benchmark.binary and benchmark.stand_in
    assert np.flatnonzero(means == means.max()).tolist() == [19, 20]
    assert means[19] == pytest.approx(0.672, abs=1e-12)
    assert means[24] == pytest.approx(0.650, abs=1e-12)
    assert means[14] == pytest.approx(0.630, abs=1e-12)
    assert means.mean() == pytest.approx(0.298, abs=0.003)


def test_calibrated_accuracies_have_the_exact_mean():
    assert stand_in_accuracies("gsm8k").mean() == pytest.approx(0.111, abs=1e-9)
    assert stand_in_accuracies("piqa").mean() == pytest.approx(0.298, abs=1e-9)


def test_matrices_differ_only_in_sampled_rows():
    first, second = load_gsm8k(1), load_gsm8k(2)
    with open(data_file("gsm8k/configs.csv")) as handle:
        greedy = np.array([float(r["temperature"]) == 0 for r in csv.DictReader(handle)])
    np.testing.assert_array_equal(first.scores[greedy], second.scores[greedy])
    assert not np.array_equal(first.scores[~greedy], second.scores[~greedy])


@pytest.mark.parametrize("loader, name", [(load_gsm8k, "gsm8k"), (load_piqa, "piqa")])
def test_configurations_prices_and_features(loader, name):
    benchmark = loader(1)
    with open(data_file(f"{name}/configs.csv")) as handle:
        rows = list(csv.DictReader(handle))
    with open(data_file("gsm8k/model_prices.csv")) as handle:
        models = [r["model"] for r in csv.DictReader(handle)]
    np.testing.assert_array_equal(benchmark.prices, [float(r["price_usd_per_1m_tokens"]) for r in rows])
    for row, codes in zip(rows, benchmark.features, strict=True):
        assert models[codes[0]] == row["model"]
        assert TEMPERATURES[codes[1]] == float(row["temperature"])
        assert MAX_TOKENS[codes[2]] == int(row["max_tokens"]) and PROMPTS[codes[3]] == row["prompt"]
    assert benchmark.specific_prior == {"gsm8k": (0.2, 0.01), "piqa": (0.4, 0.02)}[name]
    assert benchmark.source.startswith("stand-in")


@pytest.mark.parametrize("form", ["npy", "array", "list", "dict"])
def test_release_readers_round_trip(tmp_path, form):
    matrix = (np.random.default_rng(0).uniform(size=(122, 30)) < 0.3).astype(float)
    path = tmp_path / ("m.npy" if form == "npy" else "m.pkl")
    if form == "npy":
        np.save(path, matrix)
    else:
        payload = {"array": matrix, "list": matrix.tolist(), "dict": {"data": matrix, "models": ["x"]}}[form]
        path.write_bytes(pickle.dumps(payload))
    np.testing.assert_array_equal(read_banditeval_matrix(path), matrix)
    benchmark = load_gsm8k(path=str(path))
    assert not benchmark.stand_in and benchmark.name == "gsm8k"
    np.testing.assert_array_equal(benchmark.scores, matrix)


def test_release_reader_errors(tmp_path):
    np.save(tmp_path / "short.npy", np.zeros((10, 5)))
    with pytest.raises(ValueError, match="short.npy: 10 rows, but gsm8k has 122 configurations"):
        load_gsm8k(path=str(tmp_path / "short.npy"))
    nan = np.zeros((103, 5))
    nan[[3, 70], 1] = np.nan
    (tmp_path / "nan.pkl").write_bytes(pickle.dumps(nan))
    message = "nan.pkl: the matrix has NaN or infinite scores in 2 rows \\(rows \\[3, 70\\]\\)"
    with pytest.raises(ValueError, match=message):
        load_piqa(path=str(tmp_path / "nan.pkl"))
    (tmp_path / "bad.pkl").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="bad.pkl: cannot unpickle"):
        read_banditeval_matrix(tmp_path / "bad.pkl")
    (tmp_path / "d.pkl").write_bytes(pickle.dumps({"rows": [1]}))
    with pytest.raises(ValueError, match="needs a 'data', 'matrix' or 'scores' entry"):
        read_banditeval_matrix(tmp_path / "d.pkl")
    with pytest.raises(ValueError, match="matrix_seed must be one of 1..5"):
        load_gsm8k(6)
