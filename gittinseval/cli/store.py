"""The ``gittinseval-store`` command: the results stores (:mod:`gittinseval.sim.results_store`).

``gittinseval-store export SWEEP_DIR... --to STORE.parquet`` adds every finished run of the
sweep folders (or of other stores: that merges them) to the store, once per config digest;
with ``--replace`` they replace the stored runs of the same configs (rerun with changed code).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gittinseval.sim.results_store import export
from gittinseval.utils.text import count
from gittinseval.utils.validation import writable_folder

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="gittinseval-store",
        description="Results stores: Parquet files of finished runs, kept with the code and read by "
        "gittinseval-report.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    export_command = commands.add_parser(
        "export", help="add the runs of sweeps to a results store",
        description="Add every finished run of the sources to the results store STORE; runs already stored with "
        "the same config digest are kept as they are (or, with --replace, replaced).",
    )
    export_command.add_argument(
        "sources", nargs="+", metavar="SOURCE",
        help="sweep directories (any directory holding runs) and results stores (.parquet files)",
    )
    export_command.add_argument(
        "--to", required=True, metavar="STORE", help="the results store (a .parquet file, created if need be)"
    )
    export_command.add_argument(
        "--replace", action="store_true",
        help="the sources' runs replace the stored runs of the same config digest (the same configs rerun with "
        "changed code); without it those are kept as they are",
    )
    args = parser.parse_args(argv)
    try:
        writable_folder("--to", args.to, Path(args.to).parent)  # before the sources are read
        added, other = export(args.sources, args.to, replace=args.replace)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(2, f"gittinseval-store: error: {error}\n")
    if args.replace:
        print(f"{args.to}: added {count(added, 'run')}, replacing {count(other, 'stored run')} of the same configs")
    else:
        print(f"{args.to}: added {count(added, 'run')}, {other} stored already")


if __name__ == "__main__":
    main()
