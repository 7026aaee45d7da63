"""The web application of ``retrievalkit serve``: the pages of `routes` behind the rules
of `guard`.

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

import time
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from retrievalkit.errors import InputError, RetrievalkitError
from retrievalkit.serve import views
from retrievalkit.serve.guard import MAX_FORM_BYTES as MAX_FORM_BYTES
from retrievalkit.serve.guard import POLICY, TooLarge
from retrievalkit.serve.guard import TOKEN_VARIABLE as TOKEN_VARIABLE
from retrievalkit.serve.guard import Forbidden as Forbidden
from retrievalkit.serve.guard import Guard as Guard
from retrievalkit.serve.guard import is_loopback as is_loopback
from retrievalkit.serve.routes import OPEN_PATHS, Pages, log


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
    pages = Pages(site, Guard(host=host, port=port, token=token))
    app = Starlette(
        exception_handlers={
            Forbidden: pages.refused,
            views.NotFound: pages.refused,
            RetrievalkitError: pages.refused,
            Exception: pages.refused,
        },
        routes=pages.routes(),
    )
    app.add_middleware(BaseHTTPMiddleware, dispatch=_rules(pages))
    app.state.warm_up = pages.warm_up
    return app


#: The rest of a request's way, as the middleware sees it.
Next = Callable[[Request], Awaitable[Response]]


def _rules(pages: Pages) -> Callable[[Request, Next], Awaitable[Response]]:
    """The middleware every request passes: ``Host``, ``Origin`` and sign-in first, then
    the page; the security headers and one access-log line on every response."""
    guard = pages.guard

    async def rules(request: Request, call_next: Next) -> Response:
        began = time.perf_counter()
        try:
            guard.check_host(request)
            guard.check_origin(request)
            if not guard.signed_in(request) and request.url.path not in OPEN_PATHS:
                if request.method == "GET":
                    response: Response = RedirectResponse("/login", status_code=303)
                else:
                    response = pages.error(request, 401, "sign in with the server's token first")
            else:
                response = await call_next(request)
        except Forbidden as refused:
            status = 413 if isinstance(refused, TooLarge) else 403
            response = pages.error(request, status, str(refused))
        except views.NotFound as missing:
            response = pages.error(request, 404, str(missing))
        except RetrievalkitError as failed:
            response = pages.error(request, 400, str(failed))
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

    return rules
