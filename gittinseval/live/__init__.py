"""Live evaluation: any policy on real scoring calls, with a dollar budget and a crash-safe store.

- :class:`LiveTask`: what is evaluated (arms, examples, scoring function, expected costs);
  :class:`LiveConfig`: how (policy, prior, budget, store, concurrency, ...).
- :class:`Evaluator`: ask/tell over live scores, recorded in SQLite.
- :func:`evaluate` / :func:`evaluate_async`: drive a scoring function concurrently
  to a budget, with progress, retries and clean stops.
- :mod:`gittinseval.live.tasks.matrix`: a response-matrix scorer;
  :mod:`gittinseval.live.tasks.chat`: an OpenAI-compatible chat scorer.
"""

from gittinseval.live.config import LiveConfig
from gittinseval.live.driver import evaluate, evaluate_async
from gittinseval.live.evaluator import Evaluator
from gittinseval.live.failures import NonRetryableError, ScoringError, TransientError
from gittinseval.live.result import LiveResult
from gittinseval.live.run_store import RunStore, StoreLockedError
from gittinseval.live.status import ArmStatus, Recommendation
from gittinseval.live.task import LiveTask, arm_name, dataset_digest
from gittinseval.live.tasks.chat import OpenAIChatScorer, chat_task
from gittinseval.live.tasks.matrix import MatrixScorer, matrix_task
from gittinseval.live.usage import Usage

__all__ = [
    "ArmStatus",
    "Evaluator",
    "LiveConfig",
    "LiveResult",
    "LiveTask",
    "MatrixScorer",
    "NonRetryableError",
    "OpenAIChatScorer",
    "Recommendation",
    "RunStore",
    "ScoringError",
    "StoreLockedError",
    "TransientError",
    "Usage",
    "arm_name",
    "chat_task",
    "dataset_digest",
    "evaluate",
    "evaluate_async",
    "matrix_task",
]
