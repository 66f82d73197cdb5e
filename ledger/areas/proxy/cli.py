"""``--upstream NAME=URL`` and ``--upstream-key-env NAME=VAR`` for ``ledger serve``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ledger.areas.proxy.upstreams import UpstreamConfigError, check_name, check_url, parse_pair

F = TypeVar("F", bound=Callable[..., Any])


def _pairs(setting: str, what: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def remember(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Any:
        if not values:
            return values
        pairs: dict[str, str] = {}
        try:
            for value in values:
                name, rest = parse_pair(value, what)
                if name in pairs:
                    raise UpstreamConfigError(f"{what}: {name!r} given twice")
                pairs[name] = rest
            if setting == "upstreams":
                for name, url in pairs.items():
                    check_url(check_name(name), url)
        except UpstreamConfigError as exc:
            raise click.BadParameter(str(exc)) from None
        ctx.ensure_object(dict)[setting] = pairs
        return values

    return remember


def upstream_options(command: F) -> F:
    command = click.option(
        "--upstream-key-env",
        multiple=True,
        expose_value=False,
        callback=_pairs("upstream_key_envs", "--upstream-key-env"),
        metavar="NAME=VAR",
        help="Upstream NAME's API key is in environment variable VAR [LEDGER_UPSTREAM_KEY_ENVS]",
    )(command)
    return click.option(
        "--upstream",
        multiple=True,
        expose_value=False,
        callback=_pairs("upstreams", "--upstream"),
        metavar="NAME=URL",
        help="Capture proxy upstream, repeatable; the first is the default [LEDGER_UPSTREAMS]",
    )(command)
