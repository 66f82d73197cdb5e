"""The page shell shared by every viewer page, and the headers that make captures inert."""

from __future__ import annotations

from fastapi.responses import HTMLResponse

from ledger.areas.viewer.assets import CSS, ICON, JS, fingerprint
from ledger.areas.viewer.markup import Html, html

# Nothing inline and nothing from elsewhere: a payload that slipped through escaping still
# could not run a script, load a resource or post a form anywhere.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

NAV = (("overview", "/ui/", "Rollouts"), ("events", "/ui/events", "Live events"))


def page(
    title: str, body: Html, *, current: str | None = None, status_code: int = 200
) -> HTMLResponse:
    nav = Html(
        "".join(
            html(
                '<a href="{href}"{cur}>{label}</a>',
                href=href,
                label=label,
                cur=Html(' aria-current="page"') if name == current else Html(""),
            )
            for name, href, label in NAV
        )
    )
    document = html(
        """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · rollout ledger</title>
<link rel="icon" href="/ui/static/icon-{icon}.svg" type="image/svg+xml">
<link rel="stylesheet" href="/ui/static/viewer-{css}.css">
<script src="/ui/static/viewer-{js}.js" defer></script>
</head><body>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><span class="brand">Rollout ledger</span>
<nav aria-label="Pages">{nav}</nav></header>
<main id="main" tabindex="-1">{body}</main>
</body></html>""",
        title=title,
        icon=fingerprint(ICON),
        css=fingerprint(CSS),
        js=fingerprint(JS),
        nav=nav,
        body=body,
    )
    return HTMLResponse(document, status_code=status_code, headers=SECURITY_HEADERS)


def fragment(body: Html, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)


def problem(status_code: int, message: str) -> HTMLResponse:
    return page(
        "Error",
        html(
            '<h1>Error {code}</h1><p class="error" role="alert">{message}</p>'
            '<p><a href="/ui/">Back to the rollouts</a></p>',
            code=status_code,
            message=message,
        ),
        status_code=status_code,
    )
