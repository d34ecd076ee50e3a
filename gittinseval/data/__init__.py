"""Benchmarks: response matrices with per-arm prices, features and priors."""

from gittinseval.data._files import specific_prior
from gittinseval.data.alpacaeval import load_alpacaeval, load_alpacaeval_paper, read_alpaca_eval_results
from gittinseval.data.banditeval import load_gsm8k, load_piqa, read_banditeval_matrix
from gittinseval.data.benchmark import Benchmark, validate_matrix, validate_prices
from gittinseval.data.matrix import load_matrix, read_costs, read_matrix
from gittinseval.data.mmlu import load_mmlu, mmlu_batch_size, mmlu_subjects, read_prompteval_mmlu
from gittinseval.data.zeroeval import load_crux_zeroeval, load_gsm8k_zeroeval, load_math_l5_zeroeval, load_zeroeval

__all__ = [
    "Benchmark",
    "load_alpacaeval",
    "load_alpacaeval_paper",
    "load_crux_zeroeval",
    "load_gsm8k",
    "load_gsm8k_zeroeval",
    "load_math_l5_zeroeval",
    "load_matrix",
    "load_mmlu",
    "load_piqa",
    "load_zeroeval",
    "mmlu_batch_size",
    "mmlu_subjects",
    "read_alpaca_eval_results",
    "read_banditeval_matrix",
    "read_costs",
    "read_matrix",
    "read_prompteval_mmlu",
    "specific_prior",
    "validate_matrix",
    "validate_prices",
]
