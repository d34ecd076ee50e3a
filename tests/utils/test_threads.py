"""The run's torch thread count: configured, else the job's CPUs (Slurm, Ray), else 1."""

import pytest
import torch

from gittinseval.utils.threads import active_threads, job_threads, torch_threads
from gittinseval.utils.validation import ConfigError


def test_a_configured_count_wins_and_one_thread_is_the_default(monkeypatch):
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert job_threads() == 1
    assert job_threads(3) == 3
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "4")
    assert job_threads() == 4 and job_threads(2) == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, "two", True])
def test_a_bad_count_is_a_named_error(bad):
    with pytest.raises(ConfigError, match="threads must be a positive integer"):
        job_threads(bad)


def test_torch_threads_sets_the_count_inside_the_block_and_restores_it():
    before = torch.get_num_threads()
    other = 1 if before != 1 else 2
    assert active_threads() == 1
    with torch_threads(other):
        assert torch.get_num_threads() == other and active_threads() == other
        with torch_threads(before):
            assert torch.get_num_threads() == before and active_threads() == before
        assert torch.get_num_threads() == other
    assert torch.get_num_threads() == before and active_threads() == 1
    with pytest.raises(RuntimeError), torch_threads(other):
        raise RuntimeError("the block fails")
    assert torch.get_num_threads() == before


def test_root_schedule_computes_on_one_thread_unless_told_or_inside_a_run(monkeypatch):
    import gittinseval.core.roots as roots

    seen = []
    real = roots.refined_roots

    def recording(*args):
        seen.append(torch.get_num_threads())
        return real(*args)

    monkeypatch.setattr(roots, "refined_roots", recording)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # torch's own default on a 2-core machine
    try:
        roots.root_schedule(50, 5, 0.04, 1e-3)
        with torch_threads(2):
            roots.root_schedule(50, 5, 0.04, 1e-3)
        roots.root_schedule(50, 5, 0.04, 1e-3, threads=3)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen == [1, 2, 3]
