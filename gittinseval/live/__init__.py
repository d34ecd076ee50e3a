"""Live evaluation: any policy on real scoring calls, with a dollar budget and a crash-safe store.

- :class:`Evaluator`: ask/tell over live scores, recorded in SQLite.
- :func:`evaluate` / :func:`evaluate_async`: drive a scoring function concurrently
  to a budget, with progress, retries and clean stops.
- :mod:`gittinseval.live.scoring`: a response-matrix scorer and an
  OpenAI-compatible chat scorer.
"""

from gittinseval.live.driver import LiveResult, NonRetryableError, dataset_digest, evaluate, evaluate_async
from gittinseval.live.evaluator import ArmStatus, Evaluator, Recommendation, arm_name
from gittinseval.live.scoring import LiveTask, MatrixScorer, OpenAIChatScorer, chat_task, matrix_task
from gittinseval.live.store import RunStore, StoreLockedError

__all__ = [
    "ArmStatus",
    "Evaluator",
    "LiveResult",
    "LiveTask",
    "MatrixScorer",
    "NonRetryableError",
    "OpenAIChatScorer",
    "Recommendation",
    "RunStore",
    "StoreLockedError",
    "arm_name",
    "chat_task",
    "dataset_digest",
    "evaluate",
    "evaluate_async",
    "matrix_task",
]
