"""The pages' read-token check: a sign-in form keeps the token in an HttpOnly, SameSite=Strict
cookie, so a browser can read pages that the ``read_token`` protects.

The cookie holds a keyed hash of the token, not the token (there is no session store): it is
recomputed and compared in constant time. The pages accept ``Authorization: Bearer`` too.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qs, quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse

from ledger.app.http.auth import bearer_matches
from ledger.app.http.deps import get_ledger
from ledger.areas.viewer.layout import SECURITY_HEADERS, page
from ledger.areas.viewer.markup import html

COOKIE = "ledger_read_token"
MAX_FORM_BYTES = 8192


def _token(request: Request) -> str | None:
    token = get_ledger(request).settings.read_token
    return None if token is None else token.get_secret_value()


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"ledger viewer sign-in", hashlib.sha256).hexdigest()


def signed_in(request: Request) -> bool:
    token = _token(request)
    if token is None:
        return True
    cookie = request.cookies.get(COOKIE)
    if cookie is not None and hmac.compare_digest(cookie.encode(), cookie_value(token).encode()):
        return True
    return bearer_matches(request.headers.get("authorization"), token)


def safe_next(target: str | None) -> str:
    """Only a path of the viewer: never an open redirect to another site."""
    if target and target.startswith("/ui/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/ui/"


def to_sign_in(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(
        "/ui/sign-in?next=" + quote(target, safe=""), status_code=303, headers=SECURITY_HEADERS
    )


def sign_in_form(
    next_url: str, *, error: str | None = None, status_code: int = 200
) -> HTMLResponse:
    return page(
        "Sign in",
        html(
            "<h1>Sign in</h1><p>This ledger's pages need its read token.</p>{error}"
            '<form method="post" action="/ui/sign-in"><input type="hidden" name="next"'
            ' value="{next}">'
            '<label for="token">Read token</label> <input id="token" name="token" type="password" '
            'autocomplete="current-password" required autofocus> <button type="submit">Sign'
            " in</button></form>",
            error=html('<p class="error" role="alert" id="sign-in-error">{e}</p>', e=error)
            if error
            else "",
            next=next_url,
        ),
        status_code=status_code,
    )


async def sign_in(request: Request) -> HTMLResponse | RedirectResponse:
    raw = await request.body()
    if len(raw) > MAX_FORM_BYTES:
        return sign_in_form("/ui/", error="The form is too large.", status_code=413)
    try:
        fields = parse_qs(raw.decode("utf-8"), max_num_fields=10)
    except (UnicodeDecodeError, ValueError):
        return sign_in_form("/ui/", error="The form could not be read.", status_code=400)
    given = (fields.get("token") or [""])[0]
    next_url = safe_next((fields.get("next") or [""])[0])
    token = _token(request)
    if token is None:
        return RedirectResponse(next_url, status_code=303, headers=SECURITY_HEADERS)
    if not hmac.compare_digest(given.encode(), token.encode()):
        return sign_in_form(next_url, error="Wrong token: not signed in.", status_code=401)
    response = RedirectResponse(next_url, status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(
        COOKIE,
        cookie_value(token),
        httponly=True,
        samesite="strict",
        path="/ui",
        secure=request.url.scheme == "https",
    )
    return response


def sign_out() -> RedirectResponse:
    response = RedirectResponse("/ui/sign-in", status_code=303, headers=SECURITY_HEADERS)
    response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
    return response
