"""The pages of ``retrievalkit serve``: one method a route, over one site and its guard.

Reading pages (``GET``) render a view of `views`; writing ones (``POST``) read a form,
check its CSRF token, change the labels file or the store and redirect. A refused or
failed request becomes an error page with the status that says why.
"""

from __future__ import annotations

import logging
import secrets
import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from retrievalkit.errors import RetrievalkitError
from retrievalkit.serve import views
from retrievalkit.serve.guard import (
    AUTH_COOKIE,
    GRADER,
    GRADER_COOKIE,
    SESSION_COOKIE,
    Forbidden,
    Guard,
    TooLarge,
    equal,
    read_form,
)
from retrievalkit.serve.templates import CSS, SCRIPT, environment, url

log = logging.getLogger("retrievalkit.serve")

#: The templates, in the order the warm-up compiles them.
TEMPLATES = ("keys", "history", "compare", "question", "judge", "drift", "login", "error")

#: Paths that answer before sign-in: the sign-in form and what it is drawn with.
OPEN_PATHS = frozenset({"/login", "/static/serve.css", "/static/serve.js", "/favicon.ico"})


def bounded(text: str | None, default: int, lowest: int, highest: int) -> int:
    """A whole number from a query or form value, within [lowest, highest]; ``default``
    when it is missing or not a number."""
    try:
        value = int(text) if text not in (None, "") else default
    except ValueError:
        return default
    return min(max(value, lowest), highest)


class Pages:
    """The routes of one server: what each page shows and what each form changes."""

    def __init__(self, site: views.Site, guard: Guard) -> None:
        self.site = site
        self.guard = guard
        self.templates = environment()

    def routes(self) -> list[Route]:
        return [
            Route("/", self.keys),
            Route("/history", self.history),
            Route("/compare", self.compare),
            Route("/drift", self.drift),
            Route("/question", self.question),
            Route("/judge", self.judge),
            Route("/judge/grade", self.grade, methods=["POST"]),
            Route("/judge/name", self.name, methods=["POST"]),
            Route("/pin", self.pin, methods=["POST"]),
            Route("/login", self.login, methods=["GET", "POST"]),
            Route("/static/{name}", self.static),
            Route("/favicon.ico", lambda request: Response(status_code=204)),
        ]

    # -- rendering ---------------------------------------------------------------------

    def page(self, request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
        session = self.guard.session(request) or secrets.token_urlsafe(32)
        body = self.templates.get_template(name).render(
            page=name,
            store_url=self.site.store.url,
            read_only=self.site.read_only,
            pool_name=self.site.pool.name if self.site.pool is not None else None,
            csrf=self.guard.csrf(session),
            **context,
        )
        response = HTMLResponse(body, status_code=code)
        if session != self.guard.session(request):
            response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict")
        return response

    def error(self, request: Request, status: int, message: str) -> HTMLResponse:
        return self.page(request, "error", status, status=status, message=message)

    def refused(self, request: Request, exception: Exception) -> Response:
        """The error page of a request that raised: 404, 403 or 413 for a rule, 400 for
        bad input, 500 (logged) for anything else."""
        if isinstance(exception, views.NotFound):
            return self.error(request, 404, str(exception))
        if isinstance(exception, Forbidden):
            status = 413 if isinstance(exception, TooLarge) else 403
            return self.error(request, status, str(exception))
        if isinstance(exception, RetrievalkitError):
            return self.error(request, 400, str(exception))
        log.exception("%s %s failed", request.method, request.url.path)
        return self.error(
            request,
            500,
            f"the server could not show this page ({type(exception).__name__}); its log says why",
        )

    def grader_of(self, request: Request) -> str:
        found = urllib.parse.unquote(request.cookies.get(GRADER_COOKIE, ""))
        return found if GRADER.fullmatch(found) else ""

    # -- reading pages -----------------------------------------------------------------

    def keys(self, request: Request) -> Response:
        return self.page(request, "keys", **views.keys_view(self.site))

    def history(self, request: Request) -> Response:
        query = request.query_params
        return self.page(
            request,
            "history",
            **views.history_view(
                self.site,
                query.get("set", ""),
                query.get("retriever", ""),
                query.get("metric"),
                query.get("slice", ""),
                bounded(query.get("limit"), views.HISTORY_ROWS, 1, 100_000),
            ),
        )

    def compare(self, request: Request) -> Response:
        query = request.query_params
        view = views.compare_view(self.site, query.get("run", ""), query.get("other"))
        return self.page(request, "compare", **view)

    def question(self, request: Request) -> Response:
        query = request.query_params
        view = views.question_view(
            self.site, query.get("run", ""), query.get("id", ""), query.getlist("other")
        )
        return self.page(request, "question", **view)

    def drift(self, request: Request) -> Response:
        view = views.drift_view(self.site, request.query_params.get("id", ""))
        return self.page(request, "drift", **view)

    def judge(self, request: Request) -> Response:
        query = request.query_params
        view = views.judge_view(
            self.site,
            query.get("run", ""),
            k=bounded(query.get("k"), views.QUEUE_DEPTH, 1, 1000),
            sample=bounded(query.get("sample"), 0, 0, 10_000),
            grader=self.grader_of(request),
            question_id=query.get("q"),
            document_id=query.get("doc"),
        )
        return self.page(request, "judge", grade_names=views.GRADE_NAMES, **view)

    def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name == "serve.css":
            return Response(CSS, media_type="text/css")
        if name == "serve.js":
            return Response(SCRIPT, media_type="text/javascript")
        return Response("not found", status_code=404, media_type="text/plain")

    # -- forms -------------------------------------------------------------------------

    async def checked_form(self, request: Request) -> dict[str, str]:
        form = await read_form(request)
        self.guard.check_csrf(request, form)
        return form

    async def grade(self, request: Request) -> Response:
        form = await self.checked_form(request)
        grader = self.grader_of(request)
        if not grader:
            raise Forbidden("give your name on the judging page first")
        reason = self.site.labels.writable()
        if reason is not None:
            raise Forbidden(f"grades cannot be saved: {reason}")
        run_id, k, sample = form.get("run", ""), form.get("k"), form.get("sample")
        chosen = views.judging(
            self.site,
            run_id,
            bounded(k, views.QUEUE_DEPTH, 1, 1000),
            bounded(sample, 0, 0, 10_000),
        )
        item = chosen.queue.find(form.get("question", ""), form.get("document", ""))
        if item is None:
            whose = "the pool's" if chosen.pool is not None else "this run's"
            raise views.NotFound(f"that document is not in {whose} judging queue")
        value = bounded(form.get("grade"), -1, -1, 99)
        if not 0 <= value <= 3:
            raise Forbidden("a grade is 0, 1, 2 or 3")
        self.site.labels.grade(item.question_id, item.document_id, value, grader)
        if chosen.pool is not None:
            return RedirectResponse("/judge", status_code=303)
        return RedirectResponse(url("/judge", run=run_id, k=k, sample=sample), status_code=303)

    async def name(self, request: Request) -> Response:
        form = await self.checked_form(request)
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

    async def pin(self, request: Request) -> Response:
        from retrievalkit.stores import pinning

        form = await self.checked_form(request)
        if self.site.read_only:
            raise Forbidden(f"the store is read-only: {self.site.read_only}")
        record = self.site.record(form.get("run", ""))
        pinning(self.site.store, "pin a baseline").pin(record)
        target = url("/history", set=record.set, retriever=record.model)
        return RedirectResponse(target, status_code=303)

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return self.page(request, "login", failed=False)
        form = await self.checked_form(request)
        if self.guard.token is None or not equal(form.get("token", ""), self.guard.token):
            return self.page(request, "login", 401, failed=True)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(AUTH_COOKIE, self.guard.auth_value(), httponly=True, samesite="strict")
        return response

    def warm_up(self) -> None:
        """Compile the templates and import what the pages compute with, so that the first
        visitor does not wait for it (run in a thread once the server listens)."""
        for name in TEMPLATES:
            self.templates.get_template(name)
        views.warm_up(self.site)
