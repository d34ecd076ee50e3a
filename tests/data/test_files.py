"""The bundled data files (gittinseval.data._files): where they are, the CSV reader, the paper's priors table and
the error for an unknown name."""

import csv

import pytest

from gittinseval.data._files import data_file, read_csv, specific_prior, unknown_name


def test_a_bundled_file_is_found_in_the_package_and_read_row_by_row():
    path = data_file("priors.csv")
    assert path.is_file() and path.parent.name == "files" and path.parent.parent.name == "data"
    rows = read_csv("priors.csv")
    with open(path, newline="") as handle:
        lines = [line for line in handle.read().splitlines() if line]
    assert len(rows) == len(lines) - 1  # one dict a data line, keyed by the header
    assert list(rows[0]) == lines[0].split(",")
    assert rows[0] == next(csv.DictReader(lines))


def test_the_priors_table_gives_each_benchmarks_prior_and_names_what_it_lacks():
    for row in read_csv("priors.csv"):
        assert specific_prior(row["benchmark"], row["group"]) == (float(row["prior_mean"]), float(row["prior_var"]))
    assert specific_prior("all", "general") == (0.5, 0.04)  # GittinsEval-G's
    assert specific_prior("gsm8k") == (0.2, 0.01)
    with pytest.raises(KeyError, match="no prior for benchmark 'gsm8k', group 'general' in priors.csv"):
        specific_prior("gsm8k", "general")


def test_an_unknown_name_suggests_the_closest_or_lists_every_choice():
    error = unknown_name("subject", "anatomi", ["anatomy", "astronomy", "virology"])
    assert isinstance(error, ValueError)
    assert str(error) == "unknown subject 'anatomi'; did you mean anatomy?"
    far = unknown_name("benchmark", "zzz", ["gsm8k", "piqa"])
    assert str(far) == "unknown benchmark 'zzz'; choose one of gsm8k, piqa"
