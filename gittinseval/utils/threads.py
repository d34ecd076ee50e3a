"""How many threads torch's intra-op pool uses while a run computes.

Two threads buy nothing on an idle 2-core machine and make the root tables 2-10x
slower as soon as another CPU-bound process shares the cores: a pool whose
threads meet at a barrier spins while one of them is descheduled.  So a run uses
the CPUs its job was given, and one where nothing says: one per job in a
multirun (joblib gives every worker a core), the allocation under Slurm
(``SLURM_CPUS_PER_TASK``) and in a Ray task (its ``num_cpus``).  The library's
own default, for :func:`~gittinseval.core.roots.root_schedule` called from Python,
is one thread too, unless a run has set the count (:func:`torch_threads`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from gittinseval.utils.validation import positive_int

__all__ = ["active_threads", "job_threads", "torch_threads"]

_active: list[int] = []


def _ray_task_cpus() -> int | None:
    """The CPUs Ray assigned to the current task, if this process is a Ray worker running one."""
    ray = sys.modules.get("ray")  # never import Ray just to ask
    if ray is None or not ray.is_initialized():
        return None
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    return max(1, int(cpus)) if cpus else None


def job_threads(configured: int | None = None) -> int:
    """The thread count of a run: ``configured`` if given, else the job's CPUs, else 1.

    The job's CPUs are Slurm's ``SLURM_CPUS_PER_TASK`` or the CPUs of the current
    Ray task; anywhere else (a single run, a joblib or submitit-local multirun,
    the live evaluator) one thread.
    """
    if configured is not None:
        return positive_int("threads", configured)
    slurm = os.environ.get("SLURM_CPUS_PER_TASK")
    if slurm:
        return positive_int("SLURM_CPUS_PER_TASK", slurm)
    return _ray_task_cpus() or 1


def active_threads() -> int:
    """The count set by the innermost :func:`torch_threads` block, else 1 (the library's default)."""
    return _active[-1] if _active else 1


@contextmanager
def torch_threads(threads: int) -> Iterator[int]:
    """Run the block with ``torch.set_num_threads(threads)``; restore the previous count after."""
    threads = positive_int("threads", threads)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    _active.append(threads)
    try:
        yield threads
    finally:
        _active.pop()
        torch.set_num_threads(previous)
