"""The upstreams the proxy forwards to: ``NAME=URL`` pairs and where each one's API key lives.

A name becomes the capture's ``model_ref.name`` and a path segment
(``/ng-rollout/<id>/upstreams/<name>/v1/...``), so it has the rollout-id charset. The API key is
read from the environment variable the settings name, once, when the proxy starts; it is held
as a secret, never logged and never part of a capture.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import httpx
from pydantic import SecretStr

from ledger.areas.proxy.upstream_client import Origin
from ledger.log.errors import UnsafeConfiguration

UPSTREAM_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class UpstreamConfigError(ValueError):
    """A malformed ``--upstream`` or ``--upstream-key-env`` value (the message names it)."""


@dataclass(frozen=True)
class Upstream:
    name: str
    # Scheme, host and the path the forwarded ``/v1/...`` is appended to (no trailing ``/v1``).
    url: httpx.URL
    api_key: SecretStr | None = None

    @cached_property
    def origin(self) -> Origin:
        default_port = 443 if self.url.scheme == "https" else 80
        host = self.url.raw_host.decode("ascii")  # IDNA-encoded, IPv6 without brackets
        return Origin(self.url.scheme, host, self.url.port or default_port)

    @cached_property
    def host_header(self) -> bytes:
        """``host[:port]`` as httpx sends it (the port only when not the scheme's default)."""
        return self.url.netloc

    def target(self, raw_path: bytes, query: bytes) -> bytes:
        """The request target ``<path>/v1/...`` with the client's path and query exactly as
        they came (raw)."""
        base = self.url.raw_path.split(b"?", 1)[0].rstrip(b"/")
        return base + raw_path + (b"?" + query if query else b"")


def parse_pair(value: str, what: str) -> tuple[str, str]:
    name, sep, rest = value.partition("=")
    if not sep or not name or not rest:
        raise UpstreamConfigError(f"{what}: expected NAME=VALUE, got {value[:200]!r}")
    return name, rest


def check_name(name: str) -> str:
    if UPSTREAM_NAME_PATTERN.fullmatch(name) is None:
        raise UpstreamConfigError(
            f"upstream name {name[:100]!r}: use 1-64 of A-Z a-z 0-9 . _ - (starting alnum)"
        )
    return name


def check_url(name: str, url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UpstreamConfigError(f"upstream {name!r}: invalid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UpstreamConfigError(f"upstream {name!r}: URL must be http(s)://host[:port][/path]")
    if parsed.query or parsed.fragment or parsed.userinfo:
        raise UpstreamConfigError(
            f"upstream {name!r}: URL must carry no query, fragment or credentials"
        )
    # An OpenAI-style base URL ends in /v1; the forwarded path brings its own /v1.
    path = parsed.path.rstrip("/").removesuffix("/v1")
    return parsed.copy_with(path=path or "/")


def check_upstreams(upstreams: Mapping[str, str]) -> dict[str, str]:
    for name, url in upstreams.items():
        check_url(check_name(name), url)
    return dict(upstreams)


def check_key_envs(key_envs: Mapping[str, str], upstreams: Mapping[str, str]) -> dict[str, str]:
    for name, env in key_envs.items():
        if name not in upstreams:
            raise UpstreamConfigError(f"upstream key env for {name!r}: no such upstream")
        if ENV_NAME_PATTERN.fullmatch(env) is None:
            raise UpstreamConfigError(f"upstream {name!r}: {env[:100]!r} is not a variable name")
    return dict(key_envs)


def load_upstreams(
    upstreams: Mapping[str, str],
    key_envs: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
) -> dict[str, Upstream]:
    """The configured upstreams in order (the first is the default), keys read from ``environ``.

    A key variable that is named but unset or empty refuses to start: calls would otherwise
    go out without the credentials the operator meant them to carry.
    """
    environ = os.environ if environ is None else environ
    loaded: dict[str, Upstream] = {}
    for name, url in upstreams.items():
        key: SecretStr | None = None
        env = key_envs.get(name)
        if env is not None:
            value = environ.get(env)
            if not value:
                raise UnsafeConfiguration(
                    f"upstream {name!r}: environment variable {env} (its API key) is not set"
                )
            key = SecretStr(value)
        loaded[name] = Upstream(name=name, url=check_url(check_name(name), url), api_key=key)
    return loaded
