"""Time ``import gittinseval`` with Python's own import profiler, beside torch's share of it.

    .venv/bin/python scripts/benchmark_import.py [--repeats 9] [--against OTHER_CHECKOUT]

Each repeat is a fresh ``python -X importtime -c "import gittinseval"``; the profiler's
cumulative microseconds give the whole import, the part spent importing torch, and the
rest ("beyond torch": what the package itself and its other dependencies cost).  It
also says whether the live evaluator and the OpenAI client were imported.

``--against`` names another checkout of the project (a git worktree of an older commit,
say); its package is imported with this interpreter through ``PYTHONPATH``, alternating
with this one's, so that both see the same load.  It prints the medians of each, and
the median of the pair-by-pair ratios of the time beyond torch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

PROBE = "import gittinseval, sys; print(int('gittinseval.live' in sys.modules), int('openai' in sys.modules))"
REPOSITORY = Path(__file__).resolve().parents[1]


def profile_import(checkout: Path) -> dict[str, float]:
    """Seconds of the whole import, of torch within it, and of the rest; and what it pulled in."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", PROBE], capture_output=True, text=True,
                          check=True, env=env, cwd=checkout)
    cumulative = {}
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            _, total, name = line.removeprefix("import time:").split("|")
            cumulative.setdefault(name.strip(), int(total))
    live, openai = (int(flag) for flag in done.stdout.split())
    whole, torch = cumulative["gittinseval"] / 1e6, cumulative.get("torch", 0) / 1e6
    return {"whole": whole, "torch": torch, "beyond": whole - torch, "live": live, "openai": openai}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--against", type=Path, default=None, help="another checkout, timed in turn with this one")
    args = parser.parse_args()
    checkouts = {"this": REPOSITORY} | ({"against": args.against.resolve()} if args.against else {})
    runs = {name: [] for name in checkouts}
    for _ in range(args.repeats):
        for name, checkout in checkouts.items():
            runs[name].append(profile_import(checkout))
    for name, profiles in runs.items():
        medians = {key: statistics.median(profile[key] for profile in profiles) for key in ("whole", "torch", "beyond")}
        beyond = [profile["beyond"] for profile in profiles]
        print(f"{name:8s} {checkouts[name]}: import {medians['whole']:.2f} s, torch {medians['torch']:.2f} s, "
              f"beyond torch {medians['beyond']:.2f} s (min {min(beyond):.2f}, max {max(beyond):.2f}); "
              f"imports live: {bool(profiles[0]['live'])}, openai: {bool(profiles[0]['openai'])}")
    if args.against:
        ratios = [ours["beyond"] / theirs["beyond"] for ours, theirs in zip(runs["this"], runs["against"], strict=True)]
        print(f"beyond torch, this / against: median {statistics.median(ratios):.2f} over {len(ratios)} pairs "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
