"""The ``gittinseval-live`` command: a thin Hydra entry point around :func:`run_live`.

Config: ``conf/live.yaml`` with the ``task``, ``policy``, ``prior``, ``cost`` and
``logger`` groups of ``conf/``.  Rerunning with the same ``store=`` resumes;
``dry_run=true`` prints the expected cost and exits without any call.
Every error is one line on stderr: exit status 2 for a usage error (a wrong
override, bad input data, a store that is refused or in use, an unset API key
variable), 1 when the run ends on a failed scoring call or without a
recommendation (nothing was scored: the line says the last failure), 130 when it
was interrupted (Ctrl-C: the run's one-line stopped message, and the store
closed; a second Ctrl-C abandons the calls in flight, counted as lost).

``gittinseval-live export STORE --format parquet|csv|jsonl [--out PREFIX]`` writes a
store's cells and ledger as two tables (:mod:`gittinseval.live.export`) and prints
their paths; its errors are one line too, with exit status 2.

``gittinseval-live cache info`` reports the size of the chat tasks' response cache
(:mod:`gittinseval.live.response_cache`) and ``gittinseval-live cache clear`` empties it
(``--path FILE``: another cache file than the default).
"""

from __future__ import annotations

import argparse
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from gittinseval.cli.configs import CONFIG_DIR
from gittinseval.cli.errors import INTERRUPTED, RunFailure, one_line_errors, run_app
from gittinseval.live.app import dry_run, run_live
from gittinseval.live.export import export_store
from gittinseval.live.response_cache import CACHE_ENV, ResponseCache, ResponseCacheError
from gittinseval.utils.errors import UsageError

__all__ = ["LIVE_CONFIG_NAME", "main"]

LIVE_CONFIG_NAME = "live"


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name=LIVE_CONFIG_NAME)
@one_line_errors("gittinseval-live")
def _app(cfg: DictConfig) -> float:
    if cfg.dry_run:
        print(dry_run(cfg))
        return 0.0
    result = run_live(cfg, HydraConfig.get().runtime.output_dir)
    if result.stop_reason == "interrupted":
        raise SystemExit(INTERRUPTED)  # after run_live's line: stopped (interrupted), the spend, the store
    if result.recommendation is None:
        raise RunFailure(result.failure)
    if result.stop_reason == "error":
        raise RunFailure(f"stopped on an error, {result.ledger_line()}: {result.error_message}")
    return result.spent


class _OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, as the other errors of ``gittinseval-live``."""

    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message}\n")


def export(argv: list[str]) -> None:
    """``gittinseval-live export``: the store's cells and attempts tables, in one format."""
    parser = _OneLineParser(
        prog="gittinseval-live export",
        description="Write a live run's store as two tables: PREFIX.cells.EXT (one row per scored cell) and "
        "PREFIX.attempts.EXT (the ledger, one row per scoring call).",
    )
    parser.add_argument("store", metavar="STORE", help="the run's SQLite store (read-only; a run may be writing it)")
    parser.add_argument("--format", required=True, choices=["parquet", "csv", "jsonl"], help="the tables' format")
    parser.add_argument("--out", metavar="PREFIX", help="where to write the tables (default: STORE without suffix)")
    args = parser.parse_args(argv)
    try:
        paths = export_store(args.store, args.format, args.out)
    except (FileNotFoundError, UsageError) as error:
        parser.error(str(error))
    print("\n".join(str(path) for path in paths))


def cache(argv: list[str]) -> None:
    """``gittinseval-live cache info|clear``: the response cache's size and replies per model, or empty it."""
    parser = _OneLineParser(
        prog="gittinseval-live cache",
        description="The chat tasks' response cache: one SQLite file of the replies already paid for, shared by "
        f"every run and store. Default file: ${CACHE_ENV}, else $XDG_CACHE_HOME/gittinseval/responses.sqlite "
        "(~/.cache/gittinseval/responses.sqlite without XDG_CACHE_HOME).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, summary in (
        ("info", "print the file, its size on disk and its replies per model and endpoint"),
        ("clear", "delete every stored reply (the next runs pay for their requests again)"),
    ):
        command = actions.add_parser(action, help=summary, description=summary[0].upper() + summary[1:] + ".")
        command.add_argument(
            "--path", metavar="FILE",
            help=f"the cache file (default: ${CACHE_ENV}, else $XDG_CACHE_HOME/gittinseval/responses.sqlite)",
        )
    args = parser.parse_args(argv)
    response_cache = ResponseCache(args.path)
    try:
        if args.action == "clear":
            removed = response_cache.clear()
            print(f"removed {removed} repl{'y' if removed == 1 else 'ies'} from the response cache")
        print("\n".join(response_cache.info().lines()))
    except ResponseCacheError as error:
        parser.error(str(error))
    finally:
        response_cache.close()


SUBCOMMANDS = {"export": export, "cache": cache}
"""The subcommands with parsers of their own; any other command line is a run's, for Hydra."""


def main() -> None:
    if (subcommand := SUBCOMMANDS.get(sys.argv[1] if len(sys.argv) > 1 else "")) is not None:
        subcommand(sys.argv[2:])
        return
    run_app("gittinseval-live", _app)


if __name__ == "__main__":
    main()
