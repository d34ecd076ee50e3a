"""Hydra callbacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from gittinseval.plotting import plot_sweep

__all__ = ["PlotSweep"]


class PlotSweep(Callback):
    """After a multirun: draw the sweep's regret figure and say where everything is."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        figures, curves = plot_sweep(sweep_dir)
        print(f"\nRuns (trace.csv, summary.json, W&B offline runs): {sweep_dir.resolve()}/*/")
        for curve in curves:
            stop = "no signal" if curve.stop_pct is None else f"mean stop at {curve.stop_pct:.3g}%"
            print(f"  {curve.label:<24} {curve.n_runs} runs, final mean regret {curve.mean[-1]:.4g}, "
                  f"{stop} ({curve.n_stopped}/{curve.n_runs} runs)")
        for figure in figures:
            print(f"Regret figure: {figure.resolve()}")
        print(f"Upload the offline W&B runs with: wandb sync {sweep_dir}/*/wandb/offline-run-*")
