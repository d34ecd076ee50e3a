"""Constructor parameters of configured objects, read from ``__init__``'s signature.

As in scikit-learn, an object built from a config keeps each constructor argument
as an attribute of the same name.  :func:`get_params` reads them back, so the
record of a policy is exactly what rebuilds it: nested objects (GittinsEval-EB's
estimator, LRF's ensemble) become ``{"_target_": ..., **their parameters}``, the
form :func:`hydra.utils.instantiate` builds, and :func:`build` does the inverse.

The bundled baselines were a top-level package ``baselines`` until they moved into
this one as ``gittinseval.baselines`` (issue 51).  The config digests of the stored
runs (``docs/results/*.parquet``) and the identities recorded in live stores were
computed with the old ``_target_`` names, so both are computed with
:func:`legacy_targets` (``gittinseval.baselines.X`` -> ``baselines.X``); :func:`build`
takes either name (:func:`current_targets`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "BASELINES_PACKAGE",
    "LEGACY_BASELINES_PACKAGE",
    "LEGACY_BASELINE_MODULES",
    "build",
    "current_target",
    "current_targets",
    "get_params",
    "legacy_target",
    "legacy_targets",
    "target_of",
]

BASELINES_PACKAGE = "gittinseval.baselines"
"""Where the bundled baselines are."""
LEGACY_BASELINES_PACKAGE = "baselines"
"""Where they were (a top-level package), and how digests and live store identities still name them."""
LEGACY_BASELINE_MODULES = frozenset(
    {"_common", "bo", "logei", "logeipc", "lrf", "pbgi", "prompteval", "sysrs", "ucbe", "uniform"}
)
"""The modules of that package: only their targets have an old name (a baseline added since has none)."""

_PLAIN = (type(None), bool, int, float, str)


def target_of(obj: Any) -> str:
    """The ``_target_`` that builds ``obj``'s class."""
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _constructor_names(cls: type) -> list[str]:
    signature = inspect.signature(cls.__init__)
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [p.name for p in list(signature.parameters.values())[1:] if p.kind in kinds]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()):
        raise TypeError(f"{cls.__qualname__}.__init__ takes *args or **kwargs, so its parameters cannot be read")
    return names


def _record(value: Any, where: str) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_record(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        return {str(key): _record(item, f"{where}.{key}") for key, item in value.items()}
    return {"_target_": target_of(value), **get_params(value, where)}


def get_params(obj: Any, where: str | None = None) -> dict[str, Any]:
    """``{name: value}`` of every parameter of ``type(obj).__init__``, read from ``obj.<name>``.

    Values are JSON-ready: numbers, strings, lists, dicts, and nested objects as
    ``{"_target_": "module.Class", **get_params(nested)}``.  A class that does not
    keep a constructor argument under its own name is an error naming it, since its
    record could not rebuild it.
    """
    where = where or type(obj).__qualname__
    params = {}
    for name in _constructor_names(type(obj)):
        if not hasattr(obj, name):
            raise TypeError(
                f"{where}: constructor argument {name!r} is not kept as attribute self.{name}, "
                "so the object cannot be recorded and rebuilt"
            )
        params[name] = _record(getattr(obj, name), f"{where}.{name}")
    return params


def build(target: str, params: dict[str, Any]) -> Any:
    """The object of class ``target`` with the recorded ``params`` (nested ``_target_`` dicts built too)."""
    # Imported here: Hydra is a tenth of a second that `import gittinseval` need not pay.
    from hydra.utils import instantiate

    return instantiate(current_targets({"_target_": target, **params}), _convert_="all")


def legacy_target(target: str) -> str:
    """``target`` as named before the baselines moved into the package: ``gittinseval.baselines.X.Y`` ->
    ``baselines.X.Y`` for a module ``X`` of :data:`LEGACY_BASELINE_MODULES`; any other target as it is.

    Config digests (:func:`~gittinseval.sim.experiment.config_digest`) and the identity a live store
    records (:func:`~gittinseval.live.store_identity.run_settings`) name the baselines so, so that
    the runs stored and the stores made before the move keep theirs.
    """
    return _moved(target, BASELINES_PACKAGE, LEGACY_BASELINES_PACKAGE)


def current_target(target: str) -> str:
    """The inverse of :func:`legacy_target`: ``baselines.X.Y`` -> ``gittinseval.baselines.X.Y`` for a module
    ``X`` of :data:`LEGACY_BASELINE_MODULES`; any other target (of a package of one's own) as it is."""
    return _moved(target, LEGACY_BASELINES_PACKAGE, BASELINES_PACKAGE)


def _moved(target: str, old: str, new: str) -> str:
    module, dot, rest = target.removeprefix(old + ".").partition(".")
    if not target.startswith(old + ".") or not dot or module not in LEGACY_BASELINE_MODULES:
        return target
    return f"{new}.{module}.{rest}"


def legacy_targets(value: Any) -> Any:
    """``value`` with every ``_target_`` string of its (nested) dicts named by :func:`legacy_target`."""
    return _renamed(value, legacy_target)


def current_targets(value: Any) -> Any:
    """``value`` with every ``_target_`` string of its (nested) dicts named by :func:`current_target`."""
    return _renamed(value, current_target)


def _renamed(value: Any, rename: Callable[[str], str]) -> Any:
    if isinstance(value, dict):
        return {
            key: rename(item) if key == "_target_" and isinstance(item, str) else _renamed(item, rename)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_renamed(item, rename) for item in value]
    if isinstance(value, tuple):
        return tuple(_renamed(item, rename) for item in value)
    return value
