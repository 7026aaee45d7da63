"""The web application of ``retrievalkit serve``: routes, and the rules every request passes.

The rules: a server bound to another host than loopback needs a token (from
``RETRIEVALKIT_SERVE_TOKEN``), given once on a sign-in form or as ``Authorization:
Bearer``, never in a URL; on loopback, only a loopback ``Host`` header is answered (a web
page elsewhere cannot reach the server through DNS rebinding); every write is a POST
that carries the CSRF token of the visitor's session cookie and, when the browser names
where it comes from (``Origin``, else ``Referer``), comes from this server's own origin
(the scheme and the ``Host`` it was addressed to): a form another site posts is refused
with 403 even before its token is looked at; every page is sent with a
Content-Security-Policy that allows no inline script, no frame and no other origin.
The access log names the method, the path (never the query) and the status.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from retrievalkit.errors import InputError, RetrievalkitError
from retrievalkit.serve import views
from retrievalkit.serve.templates import CSS, SCRIPT, environment, url

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

log = logging.getLogger("retrievalkit.serve")


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


def _sign(secret: bytes, value: str) -> str:
    return hmac.new(secret, value.encode("utf-8"), hashlib.sha256).hexdigest()


def _equal(given: str, secret: str) -> bool:
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
        return _sign(self.token.encode("utf-8"), "retrievalkit serve sign-in")

    def signed_in(self, request: Request) -> bool:
        if self.token is None:
            return True
        header = request.headers.get("authorization", "")
        if header.startswith("Bearer ") and _equal(header[7:], self.token):
            return True
        cookie = request.cookies.get(AUTH_COOKIE, "")
        return _equal(cookie, self.auth_value())

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
        return _sign(self.secret, "csrf " + session)

    def check_csrf(self, request: Request, form: dict[str, str]) -> None:
        session = self.session(request)
        given = form.get("csrf", "")
        if not session or not given or not _equal(given, self.csrf(session)):
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


def _integer(text: str | None, default: int, lowest: int, highest: int) -> int:
    try:
        value = int(text) if text not in (None, "") else default
    except ValueError:
        return default
    return min(max(value, lowest), highest)


def create_app(site: views.Site, *, host: str, port: int, token: str | None) -> Starlette:
    """The application over ``site``, guarded for ``host``:``port`` (and ``token``).

    Raises `InputError` for a ``host`` other than loopback without a ``token``: anyone
    who can reach such an address could read the store and write grades."""
    if not is_loopback(host) and not token:
        raise InputError(
            f"refusing to listen on {host} without a token: anyone who can reach it could "
            "read the store and write grades",
            field="--host",
            hint=f"set {TOKEN_VARIABLE} to a long random secret, or keep the default 127.0.0.1",
        )
    guard = Guard(host=host, port=port, token=token)
    templates = environment()

    def page(request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
        session = guard.session(request) or secrets.token_urlsafe(32)
        body = templates.get_template(name).render(
            page=name,
            store_url=site.store.url,
            read_only=site.read_only,
            csrf=guard.csrf(session),
            **context,
        )
        response = HTMLResponse(body, status_code=code)
        if session != guard.session(request):
            response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict")
        return response

    def error(request: Request, status: int, message: str) -> HTMLResponse:
        return page(request, "error", status, status=status, message=message)

    def grader_of(request: Request) -> str:
        found = urllib.parse.unquote(request.cookies.get(GRADER_COOKIE, ""))
        return found if GRADER.fullmatch(found) else ""

    def keys(request: Request) -> Response:
        return page(request, "keys", **views.keys_view(site))

    def history(request: Request) -> Response:
        query = request.query_params
        return page(
            request,
            "history",
            **views.history_view(
                site,
                query.get("set", ""),
                query.get("retriever", ""),
                query.get("metric"),
                query.get("slice", ""),
                _integer(query.get("limit"), views.HISTORY_ROWS, 1, 100_000),
            ),
        )

    def compare(request: Request) -> Response:
        query = request.query_params
        return page(
            request, "compare", **views.compare_view(site, query.get("run", ""), query.get("other"))
        )

    def question(request: Request) -> Response:
        query = request.query_params
        return page(
            request,
            "question",
            **views.question_view(
                site, query.get("run", ""), query.get("id", ""), query.getlist("other")
            ),
        )

    def judge(request: Request) -> Response:
        query = request.query_params
        return page(
            request,
            "judge",
            grade_names=views.GRADE_NAMES,
            **views.judge_view(
                site,
                query.get("run", ""),
                k=_integer(query.get("k"), views.QUEUE_DEPTH, 1, 1000),
                sample=_integer(query.get("sample"), 0, 0, 10_000),
                grader=grader_of(request),
                question_id=query.get("q"),
                document_id=query.get("doc"),
            ),
        )

    async def grade(request: Request) -> Response:
        form = await read_form(request)
        guard.check_csrf(request, form)
        grader = grader_of(request)
        if not grader:
            raise Forbidden("give your name on the judging page first")
        reason = site.labels.writable()
        if reason is not None:
            raise Forbidden(f"grades cannot be saved: {reason}")
        run_id, k, sample = form.get("run", ""), form.get("k"), form.get("sample")
        record = site.record(run_id)
        queue = site.queue(
            record, _integer(k, views.QUEUE_DEPTH, 1, 1000), _integer(sample, 0, 0, 10_000)
        )
        item = queue.find(record.outcomes, form.get("question", ""), form.get("document", ""))
        if item is None:
            raise views.NotFound("that document is not in this run's judging queue")
        value = _integer(form.get("grade"), -1, -1, 99)
        if not 0 <= value <= 3:
            raise Forbidden("a grade is 0, 1, 2 or 3")
        site.labels.grade(item.question_id, item.document_id, value, grader)
        return RedirectResponse(url("/judge", run=run_id, k=k, sample=sample), status_code=303)

    async def name(request: Request) -> Response:
        form = await read_form(request)
        guard.check_csrf(request, form)
        grader = " ".join(form.get("grader", "").split())
        if not GRADER.fullmatch(grader):
            raise Forbidden("a name is 1 to 40 letters, digits, spaces or . _ @ -")
        target = form.get("next", "/judge")
        if not target.startswith("/judge?") and target != "/judge":
            target = "/"
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            GRADER_COOKIE, urllib.parse.quote(grader), httponly=True, samesite="strict"
        )
        return response

    async def pin(request: Request) -> Response:
        from retrievalkit.stores import pinning

        form = await read_form(request)
        guard.check_csrf(request, form)
        if site.read_only:
            raise Forbidden(f"the store is read-only: {site.read_only}")
        record = site.record(form.get("run", ""))
        pinning(site.store, "pin a baseline").pin(record)
        target = url("/history", set=record.set, retriever=record.model)
        return RedirectResponse(target, status_code=303)

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return page(request, "login", failed=False)
        form = await read_form(request)
        guard.check_csrf(request, form)
        if guard.token is None or not _equal(form.get("token", ""), guard.token):
            return page(request, "login", 401, failed=True)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(AUTH_COOKIE, guard.auth_value(), httponly=True, samesite="strict")
        return response

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name == "serve.css":
            return Response(CSS, media_type="text/css")
        if name == "serve.js":
            return Response(SCRIPT, media_type="text/javascript")
        return Response("not found", status_code=404, media_type="text/plain")

    def refused(request: Request, exception: Exception) -> Response:
        if isinstance(exception, views.NotFound):
            return error(request, 404, str(exception))
        if isinstance(exception, Forbidden):
            return error(request, 413 if isinstance(exception, TooLarge) else 403, str(exception))
        if isinstance(exception, RetrievalkitError):
            return error(request, 400, str(exception))
        log.exception("%s %s failed", request.method, request.url.path)
        return error(
            request,
            500,
            f"the server could not show this page ({type(exception).__name__}); its log says why",
        )

    app = Starlette(
        exception_handlers={
            Forbidden: refused,
            views.NotFound: refused,
            RetrievalkitError: refused,
            Exception: refused,
        },
        routes=[
            Route("/", keys),
            Route("/history", history),
            Route("/compare", compare),
            Route("/question", question),
            Route("/judge", judge),
            Route("/judge/grade", grade, methods=["POST"]),
            Route("/judge/name", name, methods=["POST"]),
            Route("/pin", pin, methods=["POST"]),
            Route("/login", login, methods=["GET", "POST"]),
            Route("/static/{name}", static),
            Route("/favicon.ico", lambda request: Response(status_code=204)),
        ],
    )

    async def rules(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        began = time.perf_counter()
        try:
            guard.check_host(request)
            guard.check_origin(request)
            open_paths = ("/login", "/static/serve.css", "/static/serve.js", "/favicon.ico")
            if not guard.signed_in(request) and request.url.path not in open_paths:
                if request.method == "GET":
                    response: Response = RedirectResponse("/login", status_code=303)
                else:
                    response = error(request, 401, "sign in with the server's token first")
            else:
                response = await call_next(request)
        except Forbidden as refused:
            response = error(request, 413 if isinstance(refused, TooLarge) else 403, str(refused))
        except views.NotFound as missing:
            response = error(request, 404, str(missing))
        except RetrievalkitError as failed:
            response = error(request, 400, str(failed))
        response.headers["Content-Security-Policy"] = POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        # same-origin: no Referer to any other site, and a browser still sends this server's
        # own Origin with its forms (under no-referrer it would send "Origin: null").
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Cache-Control"] = "no-store"
        log.info(
            "%s %s %d %.0f ms",
            request.method,
            request.url.path,
            response.status_code,
            (time.perf_counter() - began) * 1000,
        )
        return response

    app.add_middleware(BaseHTTPMiddleware, dispatch=rules)

    def warm_up() -> None:
        """Compile the templates and import what the pages compute with, so that the first
        visitor does not wait for it (run in a thread once the server listens)."""
        for name in ("keys", "history", "compare", "question", "judge", "login", "error"):
            templates.get_template(name)
        views.warm_up(site)

    app.state.warm_up = warm_up
    return app
