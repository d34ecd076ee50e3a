"""What a typical run costs with and without batch prices, measured on the fake server's bill.

    .venv/bin/python scripts/batch_prices.py

Serves the fake chat endpoint (``gittinseval.live.fake_server``, with its Batch API) for the bundled
GSM8K-style task, and runs ``task=gsm8k_chat`` against it to the end (every arm on every example, the
response cache off, so that each run pays for every call) twice: in ``mode: chat``, then in ``mode: batch``
with the bundled prices' batch prices.  Prints each run's spend beside the server's bill (they are equal),
and their ratio; docs/providers.md ("Batch mode") quotes these lines.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from hydra import compose, initialize_config_dir

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.live import LIVE_CONFIG_NAME
from gittinseval.live.app import run_live
from gittinseval.live.fake_server import FakeChatServer
from gittinseval.live.tasks.prices import load_prices
from gittinseval.live.tasks.prompts import PromptTemplate
from gittinseval.live.tasks.scoring import bundled_prices, read_jsonl


def measure(batch_delay: float = 0.05) -> dict[str, tuple[float, float, int]]:
    """``{mode: (spent, the server's bill, calls billed)}`` of the two runs, each against a new fake server."""
    template = PromptTemplate("{question}")
    examples = read_jsonl(bundled="gsm8k_style.jsonl")
    answers = {template.render(example): example["answer"] for example in examples}
    measured = {}
    with tempfile.TemporaryDirectory() as folder:
        for mode in ("chat", "batch"):
            server = FakeChatServer(answers, good_model="gpt-4o", reply="Step by step, the result is {answer}.",
                                    prices=load_prices(bundled_prices()), batch_delay=batch_delay)
            overrides = [
                "task=gsm8k_chat", f"task.score_fn.base_url={server.base_url}", "task.score_fn.api_key_env=null",
                "task.score_fn.cache=never", f"task.score_fn.mode={mode}", "task.score_fn.batch.poll_seconds=0.02",
                "budget_usd=1", "logger=none", "progress=false", f"store={Path(folder) / mode}.sqlite",
            ]
            try:
                with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
                    cfg = compose(config_name=LIVE_CONFIG_NAME, overrides=overrides)
                result = run_live(cfg, Path(folder) / mode)
            finally:
                server.close()
            bill = server.bill()
            measured[mode] = (result.spent, server.cost_of_calls(), sum(line["calls"] for line in bill.values()))
    return measured


def lines(measured: dict[str, tuple[float, float, int]]) -> list[str]:
    """The report: a line per mode, then the ratio of the spends."""
    shown = [f"{mode} mode: spent ${spent:.6g}, the server's bill ${bill:.6g} ({calls} calls)"
             for mode, (spent, bill, calls) in measured.items()]
    return [*shown, f"batch / chat: {measured['batch'][0] / measured['chat'][0]:.3g}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--batch-delay", type=float, default=0.05, help="seconds to complete a batch (default 0.05)")
    args = parser.parse_args()
    print("\n".join(lines(measure(args.batch_delay))))


if __name__ == "__main__":
    main()
