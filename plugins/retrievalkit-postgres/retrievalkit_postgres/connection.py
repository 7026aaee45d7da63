"""Where a PostgreSQL server is, how to log in to it, and what a failed connection means.

A target is a libpq connection string built from a ``postgresql://`` URL (or a
``service=`` name) WITHOUT any password: libpq itself finds the password the usual
ways, ``PGPASSWORD``, ``~/.pgpass`` (``PGPASSFILE``) or a service file (``PGSERVICE``,
``PGSERVICEFILE``), when it connects. A URL that carries a password is refused, so no
secret ever reaches a configuration file, a record, a log line or a message. TLS
options (``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``, ``sslcrl``, ...) and
every other libpq parameter in the URL's query string are passed through unchanged.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.plugin_api import EvaluationError, InputError, RetrievalkitError, one_line

if TYPE_CHECKING:
    import psycopg

SCHEMES = ("postgresql", "postgres")
DEFAULT_CONNECT_TIMEOUT = 10
APPLICATION_NAME = "retrievalkit"
#: libpq parameters that carry a secret: never accepted in a URL or a configuration.
SECRET_PARAMETERS = ("password", "sslpassword")
LOGIN_HINT = (
    "give the password the libpq way: PGPASSWORD, a line in ~/.pgpass (PGPASSFILE), "
    "or a service in a pg_service.conf file named by PGSERVICE"
)


def _sorted(parameters: Mapping[str, str]) -> dict[str, str]:
    return dict(sorted(parameters.items()))


@attrs.frozen
class Target:
    """A server, a database and a login, as libpq parameters (never a password)."""

    parameters: Mapping[str, str] = attrs.field(converter=_sorted)
    shown: str

    @property
    def conninfo(self) -> str:
        """The libpq connection string."""
        from psycopg.conninfo import make_conninfo

        return str(make_conninfo("", **self.parameters))

    @property
    def where(self) -> str:
        """``host:port/database`` (or the service name), for messages."""
        service = self.parameters.get("service")
        host = self.parameters.get("host", "localhost")
        port = self.parameters.get("port", "5432")
        database = self.parameters.get("dbname")
        place = f"{host}:{port}" + (f"/{database}" if database else "")
        return f"service '{service}'" if service and "host" not in self.parameters else place

    @property
    def user(self) -> str | None:
        """The login name, if the URL names one (else libpq's default or the service's)."""
        return self.parameters.get("user")

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        """Open a connection; a failure becomes a one-line retrievalkit error."""
        import psycopg

        try:
            return psycopg.connect(self.conninfo, autocommit=autocommit)
        except psycopg.Error as error:
            raise explain_connect(error, self) from None


def target_from_url(
    url: str, *, field: str, extra: tuple[str, ...] = ()
) -> tuple[Target, dict[str, str]]:
    """Parse ``postgresql://[USER@]HOST[:PORT]/DATABASE[?PARAMETERS]``.

    Returns the target and the parameters named in ``extra`` (retrievalkit's own, such
    as the store's ``schema``), which are taken out before the rest goes to libpq.
    """
    from psycopg import conninfo

    parts = urllib.parse.urlsplit(url)
    shown = shown_url(url)
    if parts.scheme not in SCHEMES:
        raise InputError(
            f"{shown!r} is not a postgresql:// URL",
            field=field,
            hint="e.g. postgresql://ci@db.example.com:5432/retrievalkit?sslmode=verify-full",
        )
    if parts.password is not None:
        raise InputError(
            f"the URL {shown} carries a password; it must not live in the configuration",
            field=field,
            hint=f"remove it from the URL and {LOGIN_HINT}",
        )
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    ours = {name: value for name, value in query if name in extra}
    for name, _ in query:
        if name in SECRET_PARAMETERS:
            raise InputError(
                f"the URL {shown} carries a {name} parameter; secrets must not live in the "
                "configuration",
                field=field,
                hint=f"remove it and {LOGIN_HINT}",
            )
    rest = urllib.parse.urlencode([(name, value) for name, value in query if name not in extra])
    # Spelled out: urlsplit's geturl() drops the '//' of a URL without a host.
    libpq_url = f"postgresql://{parts.netloc}{parts.path}" + (f"?{rest}" if rest else "")
    try:
        parameters = conninfo.conninfo_to_dict(libpq_url)
    except Exception as error:  # psycopg.ProgrammingError: libpq refused the URL
        raise InputError(
            f"{shown!r} is not a URL libpq accepts: {_first_line(str(error))}",
            field=field,
            hint="e.g. postgresql://ci@127.0.0.1:5432/retrievalkit?sslmode=require",
        ) from None
    text = {name: str(value) for name, value in parameters.items() if value is not None}
    text.setdefault("connect_timeout", str(DEFAULT_CONNECT_TIMEOUT))
    text.setdefault("application_name", APPLICATION_NAME)
    return Target(text, shown), ours


def shown_url(url: str) -> str:
    """The URL without a password (or a secret parameter's value), for messages."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        login, _, place = netloc.rpartition("@")
        netloc = f"{login.partition(':')[0]}@{place}"
    query = [
        (name, "..." if name in SECRET_PARAMETERS else value)
        for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    ]
    text = "&".join(f"{name}={value}" for name, value in query)
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{text}" if text else "")


# --- failures -----------------------------------------------------------------------------

_SEVERITY = re.compile(r"^(FATAL|ERROR):\s+")


def _first_line(text: str) -> str:
    return one_line(text.strip().splitlines()[0] if text.strip() else text)


def server_reason(error: Exception) -> str:
    """The server's or libpq's own reason, without psycopg's 'connection to ... failed:' frame."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    # The first line that says what failed; later lines are libpq's generic hints.
    text = next((line for line in lines if " failed: " in line), lines[0] if lines else "")
    text = text.rpartition(" failed: ")[2] if " failed: " in text else text
    return one_line(_SEVERITY.sub("", text.strip()) or type(error).__name__)


def unreachable(error: Exception) -> bool:
    """Whether the server could not be reached at all (as opposed to refusing us)."""
    text = str(error)
    return any(
        marker in text
        for marker in (
            "Connection refused",
            "timeout expired",
            "could not translate host name",
            "Name or service not known",
            "No route to host",
            "server closed the connection unexpectedly",
            "the database system is shutting down",
            "the database system is starting up",
            "terminating connection",
            "No such file or directory",
            "consuming input failed",
            "connection is closed",
            "connection is lost",
            "Connection reset",
        )
    )


def explain_connect(error: Exception, target: Target) -> RetrievalkitError:
    """A connection that failed: exit 2 for a login or setting to fix, 3 for a server not there."""
    reason = server_reason(error)
    who = f"user '{target.user}'" if target.user else "the default user"
    where = target.where
    if "password authentication failed" in reason or "no password supplied" in reason:
        return InputError(
            f"PostgreSQL at {where} refused the login of {who} ({reason})",
            hint=f"check the user name and the password; {LOGIN_HINT}",
        )
    if "does not exist" in reason and ("role" in reason or "database" in reason):
        return InputError(
            f"PostgreSQL at {where}: {reason}",
            hint="check the user and database names in the URL (or the service file)",
        )
    if "pg_hba.conf" in reason:
        return InputError(
            f"PostgreSQL at {where} does not let {who} in from here ({reason})",
            hint="ask the database's administrator for a pg_hba.conf entry, or set sslmode",
        )
    if "SSL" in reason or "certificate" in reason:
        return InputError(
            f"TLS with PostgreSQL at {where} failed: {reason}",
            hint="set sslmode and sslrootcert (the server's CA file) in the URL's query string",
        )
    if "definition of service" in reason or "service file" in reason:
        return InputError(
            f"PostgreSQL connection: {reason}",
            hint="check PGSERVICE and the service file (PGSERVICEFILE or ~/.pg_service.conf)",
        )
    if unreachable(error):
        return EvaluationError(
            f"cannot reach PostgreSQL at {where}: {reason}; is the server running, and are "
            "the host and port right?"
        )
    return EvaluationError(f"cannot connect to PostgreSQL at {where}: {reason}")
