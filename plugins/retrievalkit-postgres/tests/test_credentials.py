"""Logins the libpq way, refused logins, an unreachable server, team roles, secrets kept out."""

from __future__ import annotations

import secrets
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from support import cli

from retrievalkit.formats.convert import to_json
from retrievalkit.stores import open_store


def role_url(pg_url: str, user: str, schema: str, **extra: str) -> str:
    parts = urllib.parse.urlsplit(pg_url)
    query = urllib.parse.urlencode({"schema": schema, **extra})
    return parts._replace(netloc=f"{user}@{parts.hostname}:{parts.port}", query=query).geturl()


@pytest.fixture
def team(pg_url: str, schema: str) -> Iterator[dict[str, str]]:
    """An owner, a CI writer and a read-only analyst, set up as docs/postgres.md says."""
    tag = secrets.token_hex(4)
    names = {role: f"rk_{role}_{tag}" for role in ("owner", "writer", "reader")}
    passwords = {role: f"pw-{secrets.token_hex(12)}" for role in names}
    database = urllib.parse.urlsplit(pg_url).path.strip("/")
    with psycopg.connect(pg_url, autocommit=True) as connection:
        for role, name in names.items():
            connection.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{passwords[role]}'")
        owner, writer, reader = names["owner"], names["writer"], names["reader"]
        # The grants docs/postgres.md gives, word for word apart from the names.
        for statement in (
            f"GRANT CONNECT ON DATABASE {database} TO {owner}, {writer}, {reader}",
            f"CREATE SCHEMA {schema} AUTHORIZATION {owner}",
            f"GRANT USAGE ON SCHEMA {schema} TO {writer}, {reader}",
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}"
            f" GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {writer}",
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}"
            f" GRANT SELECT ON TABLES TO {reader}",
        ):
            connection.execute(statement)
    yield {**{f"{role}_name": name for role, name in names.items()}, **passwords}
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        for name in names.values():
            connection.execute(f"DROP OWNED BY {name} CASCADE")
            connection.execute(f"DROP ROLE {name}")


def test_a_team_owner_writer_and_reader_each_do_their_part(
    pg_url: str, schema: str, team: dict[str, str], tmp_path: Path
) -> None:
    owner_url = role_url(pg_url, team["owner_name"], schema)
    writer_url = role_url(pg_url, team["writer_name"], schema)
    reader_url = role_url(pg_url, team["reader_name"], schema)
    # The writer may not create the tables: it is told who must, in one line, exit 2.
    refused = cli(
        "history",
        "--set",
        "demo",
        "--retriever",
        "bm25-demo",
        "--store",
        writer_url,
        env={"PGPASSWORD": team["writer"]},
        cwd=tmp_path,
    )
    assert refused.returncode == 2 and "open the store once as the role that owns" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    created = cli(
        "history",
        "--set",
        "demo",
        "--retriever",
        "bm25-demo",
        "--store",
        owner_url,
        env={"PGPASSWORD": team["owner"]},
        cwd=tmp_path,
    )
    assert created.returncode == 0, created.stderr
    saved = cli(
        "eval",
        "--set",
        "demo",
        "--retriever",
        "bm25-demo",
        "--store",
        writer_url,
        env={"PGPASSWORD": team["writer"]},
        cwd=tmp_path,
    )
    assert saved.returncode == 0, saved.stderr
    history = cli(
        "history",
        "--set",
        "demo",
        "--retriever",
        "bm25-demo",
        "--store",
        reader_url,
        env={"PGPASSWORD": team["reader"]},
        cwd=tmp_path,
    )
    assert history.returncode == 0, history.stderr
    denied = cli(
        "eval",
        "--set",
        "demo",
        "--retriever",
        "bm25-demo",
        "--store",
        reader_url,
        env={"PGPASSWORD": team["reader"]},
        cwd=tmp_path,
    )
    assert denied.returncode == 2 and "permission denied" in denied.stderr, denied.stderr
    assert len(denied.stderr.strip().splitlines()) == 1
    # No password went anywhere: not into a table, not into any output. The outcome
    # columns are encoded, so they are read back decoded, whole, through the store.
    with psycopg.connect(pg_url) as connection:
        stored = connection.execute(
            f"SELECT concat_ws(' ', (SELECT string_agg(r::text, ' ') FROM {schema}.runs r),"
            f" (SELECT string_agg(m::text, ' ') FROM {schema}.run_metrics m))"
        ).fetchone()[0]  # type: ignore[index]
    runs = open_store(role_url(pg_url, urllib.parse.urlsplit(pg_url).username or "", schema))
    stored += " ".join(to_json(run) for run in runs.all_runs())
    assert "bm25-demo" in stored
    for role in ("owner", "writer", "reader"):
        for text in (
            stored,
            refused.stderr,
            created.stdout,
            saved.stdout,
            saved.stderr,
            history.stdout,
            denied.stderr,
        ):
            assert team[role] not in text


def test_a_wrong_password_is_one_line_exit_2_naming_the_user(
    pg_url: str, schema: str, team: dict[str, str], tmp_path: Path
) -> None:
    url = role_url(pg_url, team["owner_name"], schema)
    wrong = "not-" + team["owner"]
    done = cli(
        "history",
        "--set",
        "demo",
        "--retriever",
        "r",
        "--store",
        url,
        env={"PGPASSWORD": wrong},
        cwd=tmp_path,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"refused the login of user '{team['owner_name']}'" in lines[0]
    assert "PGPASSWORD" in lines[0] and wrong not in done.stderr


def test_pgpass_and_service_files_log_in_without_any_variable_holding_the_password(
    pg_url: str, schema: str, team: dict[str, str], tmp_path: Path
) -> None:
    parts = urllib.parse.urlsplit(pg_url)
    database = parts.path.strip("/")
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(
        f"{parts.hostname}:{parts.port}:{database}:{team['owner_name']}:{team['owner']}\n"
    )
    pgpass.chmod(0o600)
    env = {"PGPASSWORD": "", "PGPASSFILE": str(pgpass)}
    by_file = cli(
        "history",
        "--set",
        "s",
        "--retriever",
        "r",
        "--store",
        role_url(pg_url, team["owner_name"], schema),
        env=env,
        cwd=tmp_path,
    )
    assert by_file.returncode == 0, by_file.stderr
    services = tmp_path / "pg_service.conf"
    services.write_text(
        f"[team]\nhost={parts.hostname}\nport={parts.port}\ndbname={database}\n"
        f"user={team['owner_name']}\n"
    )
    env.update(PGSERVICEFILE=str(services), PGSERVICE="team")
    by_service = cli(
        "history",
        "--set",
        "s",
        "--retriever",
        "r",
        "--store",
        f"postgresql://?schema={schema}",
        env=env,
        cwd=tmp_path,
    )
    assert by_service.returncode == 0, by_service.stderr
    explicit = cli(
        "history",
        "--set",
        "s",
        "--retriever",
        "r",
        "--store",
        f"postgresql://?service=team&schema={schema}",
        env={**env, "PGSERVICE": ""},
        cwd=tmp_path,
    )
    assert explicit.returncode == 0, explicit.stderr
    for text in (by_file.stdout, by_file.stderr, by_service.stdout, explicit.stdout):
        assert team["owner"] not in text


def test_unreachable_server_url_password_and_tls_are_one_line_errors(
    pg_url: str, tmp_path: Path
) -> None:
    parts = urllib.parse.urlsplit(pg_url)
    unreachable = cli(
        "history",
        "--set",
        "s",
        "--retriever",
        "r",
        "--store",
        "postgresql://ci@127.0.0.1:9/retrievalkit?connect_timeout=3",
        cwd=tmp_path,
    )
    assert unreachable.returncode == 2
    assert unreachable.stderr.count("\n") == 1
    assert (
        "cannot reach PostgreSQL at 127.0.0.1:9/retrievalkit: Connection refused"
        in unreachable.stderr
    )
    secret = "hunter2-" + secrets.token_hex(4)
    with_password = cli(
        "history",
        "--set",
        "s",
        "--retriever",
        "r",
        "--store",
        f"postgresql://ci:{secret}@127.0.0.1:9/db",
        cwd=tmp_path,
    )
    assert with_password.returncode == 2 and "carries a password" in with_password.stderr
    assert secret not in with_password.stderr
    as_parameter = cli(
        "history",
        "--set",
        "s",
        "--retriever",
        "r",
        "--store",
        f"postgresql://ci@127.0.0.1:9/db?password={secret}",
        cwd=tmp_path,
    )
    assert as_parameter.returncode == 2 and "carries a password parameter" in as_parameter.stderr
    assert secret not in as_parameter.stderr
    # TLS options reach libpq: this loopback server has no TLS, which sslmode=require refuses.
    tls = cli(
        "history",
        "--set",
        "s",
        "--retriever",
        "r",
        "--store",
        parts._replace(query="sslmode=require").geturl(),
        cwd=tmp_path,
    )
    assert tls.returncode == 2 and tls.stderr.count("\n") == 1
    assert "TLS with PostgreSQL" in tls.stderr and "does not support SSL" in tls.stderr
