"""The rules every request to ``retrievalkit serve`` passes: the token, the ``Host`` and
``Origin`` checks, the session and CSRF tokens, and the size and kind of a form body.

A server bound to another host than loopback needs a token (from
``RETRIEVALKIT_SERVE_TOKEN``), given once on a sign-in form or as ``Authorization:
Bearer``, never in a URL; on loopback, only a loopback ``Host`` header is answered (a web
page elsewhere cannot reach the server through DNS rebinding); every write is a POST
that carries the CSRF token of the visitor's session cookie and, when the browser names
where it comes from (``Origin``, else ``Referer``), comes from this server's own origin.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import urllib.parse

from starlette.requests import Request

TOKEN_VARIABLE = "RETRIEVALKIT_SERVE_TOKEN"
SESSION_COOKIE = "retrievalkit_session"
AUTH_COOKIE = "retrievalkit_auth"
GRADER_COOKIE = "retrievalkit_grader"
GRADER = re.compile(r"[A-Za-z0-9_.@ -]{1,40}")
LOOPBACK_NAMES = ("localhost",)
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'; connect-src 'self'"
)
MAX_FORM_BYTES = 64 * 1024


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) only reaches this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Forbidden(Exception):
    """A request refused by a rule; the message is safe to show."""


def sign(secret: bytes, value: str) -> str:
    return hmac.new(secret, value.encode("utf-8"), hashlib.sha256).hexdigest()


def equal(given: str, secret: str) -> bool:
    """Whether ``given`` is ``secret``, in constant time, whatever characters it holds
    (`hmac.compare_digest` raises on non-ASCII text, which a visitor may send)."""
    return hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), secret.encode("utf-8", "surrogateescape")
    )


class Guard:
    """The token, the session cookies and the CSRF tokens of one server."""

    def __init__(self, *, host: str, port: int, token: str | None) -> None:
        self.loopback = is_loopback(host)
        self.port = port
        self.token = token or None
        # A fresh secret each start: old pages' CSRF tokens stop working with the server.
        self.secret = secrets.token_bytes(32)
        # The loopback names, and the served address itself (another of 127.0.0.0/8).
        served = f"[{host.strip('[]')}]" if ":" in host else host
        names = ("127.0.0.1", "localhost", "[::1]", served)
        self.hosts = {f"{name}:{port}" for name in names}

    def auth_value(self) -> str:
        """The sign-in cookie's value: derived from the token, so the token never travels
        again after sign-in, and a restart with the same token keeps people signed in."""
        assert self.token is not None
        return sign(self.token.encode("utf-8"), "retrievalkit serve sign-in")

    def signed_in(self, request: Request) -> bool:
        if self.token is None:
            return True
        header = request.headers.get("authorization", "")
        if header.startswith("Bearer ") and equal(header[7:], self.token):
            return True
        cookie = request.cookies.get(AUTH_COOKIE, "")
        return equal(cookie, self.auth_value())

    def check_host(self, request: Request) -> None:
        if self.loopback and request.headers.get("host", "") not in self.hosts:
            raise Forbidden(
                "this server only answers requests addressed to 127.0.0.1, localhost or the "
                "address it listens on"
            )

    def check_origin(self, request: Request) -> None:
        """A state-changing request (any POST) whose ``Origin`` (else ``Referer``) names
        another origin than the one it was addressed to is refused: defence in depth
        beside the CSRF token. A request that names none (a script, curl) passes here."""
        if request.method in SAFE_METHODS:
            return
        origin = request.headers.get("origin")
        named = "Origin"
        if origin is None:
            origin = request.headers.get("referer")
            named = "Referer"
            if origin is None:
                return
        if not _same_origin(origin, request.headers.get("host", "")):
            shown = origin if len(origin) <= 80 and origin.isprintable() else "another site"
            raise Forbidden(
                f"this request comes from another site ({named}: {shown}), not from this "
                "server's pages: open the page on this server and send the form from there"
            )

    def session(self, request: Request) -> str:
        found = request.cookies.get(SESSION_COOKIE, "")
        return found if re.fullmatch(r"[A-Za-z0-9_-]{32,64}", found) else ""

    def csrf(self, session: str) -> str:
        return sign(self.secret, "csrf " + session)

    def check_csrf(self, request: Request, form: dict[str, str]) -> None:
        session = self.session(request)
        given = form.get("csrf", "")
        if not session or not given or not equal(given, self.csrf(session)):
            raise Forbidden(
                "this form is out of date or did not come from this server (no valid CSRF "
                "token): reload the page and try again"
            )


#: Methods that change nothing: the origin check leaves them alone.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _same_origin(origin: str, host: str) -> bool:
    """Whether ``origin`` (an ``Origin`` or ``Referer`` value) is an http(s) origin of the
    server that ``host`` (the ``Host`` header) addresses: the same name, and the same port
    (the scheme's default port when ``Host`` names none, as behind a proxy). ``null`` and
    anything else that is not an http(s) URL with a host is another origin."""
    try:
        served = urllib.parse.urlsplit(f"//{host}")
        parts = urllib.parse.urlsplit(origin.strip())
        served_port, port = served.port, parts.port
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or not served.hostname:
        return False
    if parts.username is not None or parts.password is not None:
        return False
    if parts.hostname.lower() != served.hostname.lower():
        return False
    if served_port is None:
        return port is None or port == _DEFAULT_PORTS[scheme]
    return (port or _DEFAULT_PORTS[scheme]) == served_port


class TooLarge(Forbidden):
    """A request body over `MAX_FORM_BYTES`, refused with 413 before it is read whole."""


async def read_form(request: Request) -> dict[str, str]:
    """A URL-encoded form body (the only kind the pages send), last value of each name.

    A body that declares (``Content-Length``) or turns out to be longer than
    `MAX_FORM_BYTES` is refused (`TooLarge`, 413) as soon as that is known: it is never
    read whole into memory."""
    too_large = TooLarge(
        f"the form is too large (over {MAX_FORM_BYTES // 1024} KiB): the pages never send one"
    )
    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise too_large
        chunks.append(chunk)
    body = b"".join(chunks)
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise Forbidden("a form must be sent as application/x-www-form-urlencoded")
    fields = urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    return dict(fields)
