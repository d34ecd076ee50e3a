"""The base class of usage errors, so that the command-line apps can tell them apart from bugs
without importing the layers that raise them."""

from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(Exception):
    """A problem with what the user asked for (a setting, an input file, a store that is refused).

    The command-line apps print it as one line ``<program>: error: ...`` and exit with
    code 2; anything that is not a usage error (nor one of Hydra's and OmegaConf's own,
    nor a ``ValueError`` or ``FileNotFoundError``) is a bug and keeps its traceback.
    """
