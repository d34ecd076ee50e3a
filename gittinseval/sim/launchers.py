"""Hydra launcher plugins as optional extras: usage errors for a missing plugin or a Ray cluster
the plugin cannot join, and checks, before a sweep writes anything, that Slurm is there for a
Slurm launcher and that a running Ray cluster answers in bounded time."""

from __future__ import annotations

import os
import shutil
import socket
from importlib import import_module
from pathlib import Path

from omegaconf import DictConfig

from gittinseval.utils.errors import UsageError

__all__ = ["LAUNCHER_EXTRAS", "SLURM_LAUNCHER", "check_launcher", "check_ray_cluster", "check_slurm"]

# `hydra/launcher=` option -> (the plugin package it needs, the extra that installs it).
LAUNCHER_EXTRAS = {
    "slurm": ("hydra_plugins.hydra_submitit_launcher", "slurm"),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "slurm"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "slurm"),
    "ray": ("hydra_plugins.hydra_ray_launcher", "ray"),
    "ray_cluster": ("hydra_plugins.hydra_ray_launcher", "ray"),
}
# The `_target_` of hydra-submitit-launcher's Slurm launcher (configs `slurm` and `submitit_slurm`).
SLURM_LAUNCHER = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
RAY_ADDRESS_KEY = "hydra.launcher.ray.init.address"


def _importable(module: str) -> bool:
    try:
        import_module(module)
    except ImportError:
        return False
    return True


def check_launcher(argv: list[str]) -> None:
    """Raise a :class:`~gittinseval.utils.errors.UsageError` if ``hydra/launcher=<name>`` in ``argv`` cannot work.

    A missing plugin names the extra that installs it (Hydra itself reports a missing
    config or target over many lines).  The plugin's ``ray`` config with a cluster address
    is sent to ``ray_cluster``: hydra-ray-launcher 1.2.2 then passes ``object_store_memory``,
    which ``ray.init`` refuses when it joins a running cluster.
    """
    options = dict(arg.lstrip("+").split("=", 1) for arg in argv if "=" in arg)
    name = options.get("hydra/launcher")
    if name not in LAUNCHER_EXTRAS:
        return
    plugin, extra = LAUNCHER_EXTRAS[name]
    if not _importable(plugin):
        raise UsageError(
            f"hydra/launcher={name} needs the {plugin.split('.')[-1]} plugin: pip install 'gittinseval[{extra}]' "
            f"(in a clone: pip install -e '.[{extra}]')"
        )
    if name == "ray" and (options.get(RAY_ADDRESS_KEY) or os.environ.get("RAY_ADDRESS")):
        raise UsageError(
            "hydra/launcher=ray starts a local Ray cluster; for a running one use hydra/launcher=ray_cluster "
            f"(with {RAY_ADDRESS_KEY}=host:port or RAY_ADDRESS)"
        )


def check_slurm(config: DictConfig) -> None:
    """Raise a :class:`~gittinseval.utils.errors.UsageError` if the sweep's launcher submits to Slurm and
    ``srun`` is not on the ``PATH`` (submitit would fail with a traceback once the sweep folder is made)."""
    if config.hydra.launcher.get("_target_") == SLURM_LAUNCHER and shutil.which("srun") is None:
        choice = config.hydra.runtime.choices.get("hydra/launcher")
        raise UsageError(
            f"hydra/launcher={choice} submits to Slurm, but srun is not on the PATH: run on a node of the cluster, "
            "or use hydra/launcher=submitit_local (or joblib) on this machine"
        )


def check_ray_cluster(config: DictConfig, timeout: float) -> None:
    """Raise a :class:`~gittinseval.utils.errors.UsageError` if a sweep on a running Ray cluster cannot work.

    - The address (``hydra.launcher.ray.init.address``, e.g. ``host:port`` or
      ``ray://host:port``) must accept a TCP connection within ``timeout`` seconds:
      ``ray.init`` would retry an unreachable one forever.  ``auto`` (the cluster that
      ``ray start`` recorded on this machine) is left to Ray, which fails at once when
      there is none.
    - ``hydra.sweep.dir`` must be absolute: Ray workers resolve a relative one in the
      directory where ``ray start`` ran, not where the sweep was launched.
    """
    address = str(config.hydra.launcher.ray.init.address)
    if address != "auto":
        host, _, port = address.removeprefix("ray://").rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"{RAY_ADDRESS_KEY}={address!r} is not host:port, ray://host:port or auto")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
        except OSError as error:
            raise UsageError(
                f"Ray cluster at {address} cannot be reached ({error}); nothing was run. "
                f"Start it with `ray start --head` or fix {RAY_ADDRESS_KEY}"
            ) from None
    sweep_dir = str(config.hydra.sweep.dir)
    if not Path(sweep_dir).is_absolute():
        raise UsageError(
            f"hydra.sweep.dir={sweep_dir} is relative, and Ray workers would write it under the directory where "
            "`ray start` ran: give an absolute path (shared by all nodes), e.g. hydra.sweep.dir=$PWD/outputs/ray"
        )
