"""Every arm of ``conf/task/llm_demo.yaml`` on every question against a local server: the
ground truth for the live demo's pick.

    .venv/bin/python scripts/llm_exhaustive.py [--out outputs/llm_demo] [--live-summary RUN/summary.json]

Starts the local llama.cpp server (like ``scripts/llm_demo.py``), asks each of the 12 arms
each of the 200 questions once, and saves the scores, costs and HTTP seconds per call in
``--out/exhaustive.npz`` (reused when it exists: the evaluation takes minutes).  Prints
each arm's accuracy and dollars, the exhaustive cost and the server's seconds per call.
With ``--live-summary``: the regret of the live run's recommendation (best accuracy
minus the recommended arm's), the share of the exhaustive dollars it spent and the
number of questions it scored.
Temperature-0.8 arms are sampled once per question, so their accuracy is one draw.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from local_server import LocalLlamaServer

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import LIVE_CONFIG_NAME
from gittinseval.live import LiveTask


async def ask_every_question(task: LiveTask) -> dict[str, np.ndarray]:
    """Each arm on each question, one call at a time (so that the seconds are one call's)."""
    scores = np.zeros((len(task.arms), len(task.examples)))
    dollars, seconds = np.zeros_like(scores), np.zeros_like(scores)
    scorer = task.score_fn
    for k, arm in enumerate(task.arms):
        for j, example in enumerate(task.examples):
            start = time.perf_counter()
            score, cost = await scorer(arm, [example])
            seconds[k, j] = time.perf_counter() - start
            scores[k, j], dollars[k, j] = score[0], cost
        print(f"arm {k:2d} {arm}: accuracy {scores[k].mean():.3f}, ${dollars[k].sum():.6f}", flush=True)
    await scorer.aclose()
    return {"scores": scores, "dollars": dollars, "seconds": seconds}


def evaluate_all(port: int) -> dict[str, np.ndarray]:
    with LocalLlamaServer(port=port) as server:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            overrides = ["task=llm_demo", f"task.score_fn.base_url={server.base_url}"]
            task = instantiate(compose(config_name=LIVE_CONFIG_NAME, overrides=overrides).task)
        return asyncio.run(ask_every_question(task))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/llm_demo"), help="folder of exhaustive.npz")
    parser.add_argument("--port", type=int, default=8765, help="port of the local server (default: %(default)s)")
    parser.add_argument("--live-summary", type=Path, default=None, help="summary.json of a live run to assess")
    args = parser.parse_args()
    cache = args.out / "exhaustive.npz"
    if cache.is_file():
        data = dict(np.load(cache))
    else:
        data = evaluate_all(args.port)
        args.out.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **data)
    accuracy = data["scores"].mean(axis=1)
    exhaustive = float(data["dollars"].sum())
    for k, value in enumerate(accuracy):
        print(f"arm {k:2d}: accuracy {value:.3f}, ${data['dollars'][k].sum():.6f}")
    print(f"best arm {int(accuracy.argmax())} ({accuracy.max():.3f}); exhaustive cost ${exhaustive:.6f}; "
          f"server seconds per call: median {np.median(data['seconds']):.3f}, mean {data['seconds'].mean():.3f}")
    if args.live_summary is not None:
        summary = json.loads(args.live_summary.read_text())
        if summary["recommended"] is None:
            raise SystemExit(f"{args.live_summary}: the live run has no recommendation ({summary['failure']})")
        regret = accuracy.max() - accuracy[summary["recommended"]]
        print(f"live pick arm {summary['recommended']}: regret {regret:.3f}; spent ${summary['spent']:.6f} = "
              f"{summary['spent'] / exhaustive:.1%} of the exhaustive cost; {summary['n_cells']} questions scored")


if __name__ == "__main__":
    main()
