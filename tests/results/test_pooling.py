"""How the summary tables pool runs (gittinseval/results/pooling.py)."""

from gittinseval.results.pooling import benchmark_family, by_benchmark_cost_and_label


def test_a_family_is_the_name_before_the_slash():
    assert benchmark_family("mmlu/anatomy") == "mmlu" and benchmark_family("gsm8k_zeroeval") == "gsm8k_zeroeval"


def test_values_are_grouped_by_benchmark_cost_and_label_and_unset_ones_left_out():
    runs = [{"benchmark": "b", "cost_mode": "unit", "label": "L", "x": 1},
            {"benchmark": "b", "cost_mode": "unit", "label": "L", "x": 2},
            {"benchmark": "b", "cost_mode": "aware", "label": "L", "x": 3},
            {"benchmark": "b", "cost_mode": "unit", "label": "M", "x": None},
            {"benchmark": "b", "cost_mode": "unit", "label": "N"}]
    assert by_benchmark_cost_and_label(runs, "x") == {("b", "unit", "L"): [1, 2], ("b", "aware", "L"): [3]}
