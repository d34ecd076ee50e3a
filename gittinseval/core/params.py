"""Constructor parameters of configured objects, read from ``__init__``'s signature.

As in scikit-learn, an object built from a config keeps each constructor argument
as an attribute of the same name.  :func:`get_params` reads them back, so the
record of a policy is exactly what rebuilds it: nested objects (GittinsEval-EB's
estimator, LRF's ensemble) become ``{"_target_": ..., **their parameters}``, the
form :func:`hydra.utils.instantiate` builds, and :func:`build` does the inverse.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

__all__ = ["build", "get_params", "target_of"]

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

    return instantiate({"_target_": target, **params}, _convert_="all")
