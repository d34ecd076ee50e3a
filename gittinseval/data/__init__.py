"""Benchmarks: response matrices with per-arm prices, features and priors."""

from gittinseval.data.benchmark import Benchmark, validate_matrix, validate_prices
from gittinseval.data.bundled import load_alpacaeval, load_mmlu, mmlu_subjects, specific_prior
from gittinseval.data.matrix import load_matrix, read_costs, read_matrix

__all__ = [
    "Benchmark",
    "load_alpacaeval",
    "load_matrix",
    "load_mmlu",
    "mmlu_subjects",
    "read_costs",
    "read_matrix",
    "specific_prior",
    "validate_matrix",
    "validate_prices",
]
