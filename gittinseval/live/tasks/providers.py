"""Where a chat task's arms send their requests: each arm's endpoint, and the limits of the providers they share.

A chat scorer has an endpoint and limits of its own (``base_url``, ``api_key_env``, ``rpm``,
``tpm``); an arm may set any of them (:data:`ENDPOINT_KEYS`), so that one task compares models
served by different providers.  A provider is an :class:`Endpoint`, a ``(base_url, api_key_env)``
pair: its arms share its client and its limits.  A provider's limits are those its arms set (two
arms that set one must agree), else the scorer's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gittinseval.live.rate_limits import RateLimiter, per_minute
from gittinseval.live.task import arm_name

__all__ = ["ENDPOINT_KEYS", "LIMIT_KEYS", "Endpoint", "Providers"]

LIMIT_KEYS = ("rpm", "tpm")
"""A provider's limits: requests and tokens per minute."""
ENDPOINT_KEYS = ("base_url", "api_key_env", *LIMIT_KEYS)
"""Arm settings that say where and how fast its requests go: never sent as request fields, and not a part of
the arm's name in the store (a store resumes across a change of endpoint, as across the scorer's own)."""


@dataclass(frozen=True)
class Endpoint:
    """A provider: an OpenAI-compatible endpoint and the variable of its API key.

    Attributes:
        base_url: e.g. ``http://localhost:8000/v1`` (a trailing ``/`` is dropped).
        api_key_env: the environment variable of the API key; ``None``: the server needs none.
    """

    base_url: str
    api_key_env: str | None

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url:
            raise ValueError(f"base_url must be an endpoint's URL (http://host:port/v1), got {self.base_url!r}")
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))


class Providers:
    """The provider of each arm of a chat task, and each provider's limits.

    Args:
        default: the scorer's own endpoint, of the arms that set neither ``base_url`` nor ``api_key_env``.
        rpm, tpm: the scorer's limits, of each provider none of whose arms sets its own.
    """

    def __init__(self, default: Endpoint, rpm: float | None = None, tpm: float | None = None) -> None:
        self.default = default
        self.limits = {"rpm": per_minute("rpm", rpm), "tpm": per_minute("tpm", tpm)}
        self._of_arm: dict[str, Endpoint] = {}
        self._set: dict[Endpoint, dict[str, tuple[float | None, str]]] = {}
        """Of each provider seen, the limits its arms set, each with the first arm that set it."""

    def route(self, arms: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The arms without their endpoint settings (:data:`ENDPOINT_KEYS`), as the task and its store keep
        them; each arm's provider is kept by its name, for :meth:`endpoint` to find.

        Arms that differ only in their endpoint (the same model at two providers) would have one name:
        that is a ``ValueError`` asking for a ``name`` of each.
        """
        routed, first_of = [], {}
        for position, arm in enumerate(arms):
            if not isinstance(arm, Mapping):
                raise ValueError(f"arm {position}: a chat arm is a mapping of settings (model, ...), got {arm!r}")
            endpoint = self._register(arm, f"arm {position}")
            kept = {key: value for key, value in arm.items() if key not in ENDPOINT_KEYS}
            name = arm_name(kept)
            if name in first_of and self._of_arm[name] != endpoint:
                raise ValueError(
                    f"arms {first_of[name]} and {position} differ only in their endpoint ({', '.join(ENDPOINT_KEYS)}), "
                    f"which is not a part of an arm's name: give each a name, e.g. name: {kept.get('model')}-{position}"
                )
            first_of.setdefault(name, position)
            self._of_arm[name] = endpoint
            routed.append(kept)
        return routed

    def endpoint(self, arm: Mapping[str, Any]) -> Endpoint:
        """The provider of an arm: as :meth:`route` kept it, else from the arm's own endpoint settings."""
        found = self._of_arm.get(arm_name(dict(arm)))
        return found if found is not None else self._register(arm, f"arm {arm.get('name', arm.get('model'))!r}")

    def limiter(self, endpoint: Endpoint) -> RateLimiter:
        """A new limiter of the provider's limits (one per event loop): those its arms set, else the scorer's."""
        set_here = self._set.get(endpoint, {})
        return RateLimiter(*(set_here[key][0] if key in set_here else self.limits[key] for key in LIMIT_KEYS))

    def label(self, endpoint: Endpoint) -> str:
        """The provider's name in the spend per provider: its ``base_url``, with its key's variable when another
        provider of the task has the same ``base_url``."""
        shared = sum(other.base_url == endpoint.base_url for other in self._set) > 1
        return f"{endpoint.base_url} [{endpoint.api_key_env}]" if shared else endpoint.base_url

    @property
    def endpoints(self) -> list[Endpoint]:
        """The providers of the arms seen so far (the scorer's own before any)."""
        return list(self._set) or [self.default]

    def _register(self, arm: Mapping[str, Any], which: str) -> Endpoint:
        """The arm's provider, with the limits it sets recorded: a limit that another arm of the provider set to
        another value is a ``ValueError`` naming both arms."""
        try:
            endpoint = Endpoint(
                arm.get("base_url", self.default.base_url), arm.get("api_key_env", self.default.api_key_env)
            )
            limits = {key: per_minute(key, arm[key]) for key in LIMIT_KEYS if key in arm}
        except ValueError as error:
            raise ValueError(f"{which}: {error}") from None
        set_here = self._set.setdefault(endpoint, {})
        for key, value in limits.items():
            known, first = set_here.setdefault(key, (value, which))
            if known != value:
                raise ValueError(
                    f"{which} sets {key}={value} for the provider {endpoint.base_url} (key {endpoint.api_key_env}), "
                    f"and {first} {key}={known}: the arms of a provider share its limits; set it on one of them, or "
                    "alike on each"
                )
        return endpoint
