"""Install, start, check and stop a local PostgreSQL 16 with pgvector, from PyPI's pgserver wheel.

Debian's PostgreSQL packages come without pgvector; the ``pgserver`` wheel carries a
complete PostgreSQL 16 with the ``vector`` extension. This script installs that wheel
(with pip, into a folder of its own) when it is not there yet, creates a cluster in a
folder it owns, and runs it as an unprivileged user on a loopback port:

    python3 scripts/postgres.py up [--port 5433]     # prints the URL to use
    python3 scripts/postgres.py status [--port 5433]
    python3 scripts/postgres.py down [--port 5433]

The cluster has a superuser ``retrievalkit`` whose password comes from
$RETRIEVALKIT_PG_PASSWORD (default ``retrievalkit``: the server listens on 127.0.0.1
only), TCP logins with scram-sha-256, and a database ``retrievalkit`` with the
``vector`` extension created. Clients give the password the libpq way
(``PGPASSWORD``, ``~/.pgpass`` or a service file); it is never written to a file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The launchers run as scripts; what they share is in _service.py beside them.
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service
from _service import chown_tree, is_root, port_in_use, traversable_by_others

PGSERVER_VERSION = "0.1.4"
PG_USER = "retrievalkit-pg"
SUPERUSER = "retrievalkit"
DATABASE = "retrievalkit"
PASSWORD_ENV = "RETRIEVALKIT_PG_PASSWORD"
DEFAULT_PASSWORD = "retrievalkit"
START_TIMEOUT = 60.0
LOG_TAIL = 40


def say(message: str) -> None:
    """Print a progress or status line to stderr."""
    print(f"[postgres] {message}", file=sys.stderr, flush=True)


def cache_base() -> Path:
    """The folder that holds this service's installation and its per-port folders."""
    return _service.cache_base("postgres", "RETRIEVALKIT_PG_HOME")


def ensure_user() -> tuple[int, int] | None:
    """Create the unprivileged server user when root; its (uid, gid), or None if not root."""
    return _service.ensure_user(PG_USER, say)


def default_port() -> int:
    """The port from RETRIEVALKIT_PG_PORT, or 5433 (5432 is left to a system server)."""
    return int(os.environ.get("RETRIEVALKIT_PG_PORT") or 5433)


def install_dir(base: Path) -> Path:
    """Where pip puts the pgserver wheel (its ``pgserver/pginstall`` holds PostgreSQL)."""
    return base / f"pgserver-{PGSERVER_VERSION}"


def pg_home(base: Path) -> Path:
    """The PostgreSQL installation (bin/, lib/, share/) inside the installed wheel."""
    return install_dir(base) / "pgserver" / "pginstall"


def binary(base: Path, name: str) -> str:
    """The path of one of PostgreSQL's programs."""
    return str(pg_home(base) / "bin" / name)


def ensure_installed(base: Path) -> bool:
    """Install the pgserver wheel into the cache with pip unless it is there; True if usable."""
    home = pg_home(base)
    needed = [home / "bin" / name for name in ("initdb", "pg_ctl", "postgres", "psql")]
    vector = home / "lib" / "postgresql" / "vector.so"
    if all(path.is_file() for path in [*needed, vector]):
        return True
    target = install_dir(base)
    staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=base))
    say(f"installing pgserver=={PGSERVER_VERSION} (PostgreSQL 16 + pgvector) with pip")
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--target",
        str(staging),
        f"pgserver=={PGSERVER_VERSION}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 and shutil.which("uv"):
        say("pip failed; trying uv")
        command = ["uv", "pip", "install", "--quiet", "--no-deps", "--target", str(staging)]
        result = subprocess.run(
            [*command, f"pgserver=={PGSERVER_VERSION}"], capture_output=True, text=True, check=False
        )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        say(f"could not install pgserver=={PGSERVER_VERSION}:\n{result.stderr[-2000:]}")
        return False
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    for folder, dirs, _files in os.walk(target):
        for name in dirs:
            path = Path(folder) / name
            path.chmod(path.stat().st_mode | 0o755)
    target.chmod(0o755)
    if not all(path.is_file() for path in [*needed, vector]):
        say(f"the pgserver wheel in {target} has no {home / 'bin' / 'postgres'} or vector.so")
        return False
    return True


def cluster_dir(base: Path, port: int) -> Path:
    """The per-port folder: data/, the socket folder, the server log."""
    return base / "clusters" / str(port)


def data_dir(base: Path, port: int) -> Path:
    """The cluster's data directory."""
    return cluster_dir(base, port) / "data"


def socket_dir(base: Path, port: int) -> Path:
    """Where the server puts its Unix socket (reachable by its user and root only)."""
    return cluster_dir(base, port) / "socket"


def log_file(base: Path, port: int) -> Path:
    """The server's log."""
    return cluster_dir(base, port) / "server.log"


def as_server_user(
    command: list[str], ids: tuple[int, int] | None, *, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one of PostgreSQL's programs as the server user, output captured."""
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd="/",
        env=env,
        user=ids[0] if ids else None,
        group=ids[1] if ids else None,
        extra_groups=[] if ids else None,
    )


def password() -> str:
    """The superuser's password: $RETRIEVALKIT_PG_PASSWORD, or the loopback default."""
    return os.environ.get(PASSWORD_ENV) or DEFAULT_PASSWORD


def ready(base: Path, port: int) -> bool:
    """Whether a server accepts connections on 127.0.0.1:port (pg_isready)."""
    if not Path(binary(base, "pg_isready")).is_file():
        return False
    result = subprocess.run(
        [binary(base, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port), "-t", "3"],
        capture_output=True,
        check=False,
    )
    return result.returncode == 0


def server_pid(base: Path, port: int) -> int | None:
    """The postmaster's pid from postmaster.pid when that process still runs."""
    try:
        pid = int((data_dir(base, port) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return None
    return pid if "postgres" in command else None


def psql(base: Path, port: int, database: str, sql: str, ids: tuple[int, int] | None) -> str:
    """Run SQL as the superuser over the Unix socket; returns psql's output or raises."""
    result = as_server_user(
        [
            binary(base, "psql"),
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(socket_dir(base, port)),
            "-p",
            str(port),
            "-U",
            SUPERUSER,
            "-d",
            database,
            "-c",
            sql,
        ],
        ids,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip() or f"psql exit code {result.returncode}")
    return result.stdout


def initialise(base: Path, port: int, ids: tuple[int, int] | None) -> bool:
    """initdb a fresh cluster: scram-sha-256 over TCP, trust on the private socket."""
    folder = cluster_dir(base, port)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    socket_dir(base, port).mkdir()
    folder.parent.chmod(0o755)
    folder.chmod(0o700)
    chown_tree(folder, ids)
    secret = Path(tempfile.mkdtemp(prefix=".initdb-", dir=folder)) / "pw"
    try:
        # initdb reads the password from a file; it lives only while initdb runs.
        secret.write_text(password() + "\n")
        secret.chmod(0o600)
        chown_tree(secret.parent, ids)
        result = as_server_user(
            [
                binary(base, "initdb"),
                "-D",
                str(data_dir(base, port)),
                "-U",
                SUPERUSER,
                f"--pwfile={secret}",
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "--encoding=UTF8",
                "--locale=C",
            ],
            ids,
        )
    finally:
        shutil.rmtree(secret.parent, ignore_errors=True)
    if result.returncode != 0:
        say(f"initdb failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
        return False
    return True


def start(base: Path, port: int, ids: tuple[int, int] | None) -> bool:
    """pg_ctl start on 127.0.0.1:port and wait until it accepts connections."""
    options = " ".join(
        [
            "-c listen_addresses=127.0.0.1",
            f"-c port={port}",
            f"-c unix_socket_directories={socket_dir(base, port)}",
            "-c unix_socket_permissions=0700",
            "-c max_connections=100",
            "-c shared_buffers=128MB",
            "-c fsync=on",
        ]
    )
    result = as_server_user(
        [
            binary(base, "pg_ctl"),
            "start",
            "-w",
            "-t",
            str(int(START_TIMEOUT)),
            "-D",
            str(data_dir(base, port)),
            "-l",
            str(log_file(base, port)),
            "-o",
            options,
        ],
        ids,
    )
    if result.returncode != 0:
        say(f"pg_ctl start failed:\n{result.stdout[-1000:]}{result.stderr[-1000:]}")
        print(log_tail(base, port), file=sys.stderr, flush=True)
        return False
    deadline = time.monotonic() + START_TIMEOUT
    while not ready(base, port):
        if time.monotonic() > deadline:
            say("the server never accepted connections")
            print(log_tail(base, port), file=sys.stderr, flush=True)
            return False
        time.sleep(0.3)
    return True


def prepare_database(base: Path, port: int, ids: tuple[int, int] | None) -> None:
    """The ``retrievalkit`` database with the vector extension (idempotent)."""
    exists = psql(
        base, port, "postgres", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'", ids
    )
    if not exists.strip():
        psql(base, port, "postgres", f'CREATE DATABASE "{DATABASE}"', ids)
    psql(base, port, DATABASE, "CREATE EXTENSION IF NOT EXISTS vector", ids)


def log_tail(base: Path, port: int) -> str:
    """The last lines of the server log."""
    try:
        lines = log_file(base, port).read_text(errors="replace").splitlines()
    except OSError:
        return "(no server log)"
    return "\n".join(lines[-LOG_TAIL:])


def url(port: int) -> str:
    """The URL clients use (the password comes from PGPASSWORD or ~/.pgpass)."""
    return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}"


def stop(base: Path, port: int) -> bool:
    """pg_ctl stop (fast), then SIGKILL if it lingers; True if a server of ours ran."""
    pid = server_pid(base, port)
    if pid is None:
        return False
    say(f"stopping the server (pid {pid})")
    result = as_server_user(
        [
            binary(base, "pg_ctl"),
            "stop",
            "-m",
            "fast",
            "-w",
            "-t",
            "30",
            "-D",
            str(data_dir(base, port)),
        ],
        ensure_user(),
    )
    if result.returncode != 0 and server_pid(base, port) is not None:
        say(f"pg_ctl stop failed ({result.stderr.strip()}); SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return True


def cmd_up(args: argparse.Namespace) -> int:
    """Install if needed, initialise if needed, start unless running; print the URL."""
    base, port = cache_base(), args.port
    base.mkdir(parents=True, exist_ok=True)
    if is_root():
        base.chmod(base.stat().st_mode | 0o755)
        if not traversable_by_others(base):
            say(f"{base} must be reachable by user {PG_USER}: choose another RETRIEVALKIT_PG_HOME")
            return 1
    if not ensure_installed(base):
        return 1
    ids = ensure_user()
    if server_pid(base, port) is not None and ready(base, port):
        prepare_database(base, port, ids)
        say(f"PostgreSQL already running at 127.0.0.1:{port} ({cluster_dir(base, port)})")
        print(url(port))
        return 0
    if port_in_use(port):
        say(f"port {port} on 127.0.0.1 is taken by another process")
        return 1
    started = time.monotonic()
    fresh = not (data_dir(base, port) / "PG_VERSION").is_file()
    if fresh and not initialise(base, port, ids):
        return 1
    if not start(base, port, ids):
        stop(base, port)
        return 1
    try:
        prepare_database(base, port, ids)
    except RuntimeError as error:
        say(f"could not create the database {DATABASE} with pgvector: {error}")
        stop(base, port)
        return 1
    version = psql(base, port, DATABASE, "SHOW server_version", ids).strip()
    vector = psql(
        base, port, DATABASE, "SELECT extversion FROM pg_extension WHERE extname = 'vector'", ids
    ).strip()
    action = "initialised and started" if fresh else "started"
    say(
        f"PostgreSQL {version} with pgvector {vector} {action} in "
        f"{time.monotonic() - started:.1f} s at 127.0.0.1:{port} (folder {cluster_dir(base, port)})"
    )
    print(url(port))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    """Stop the server on the port if it is ours and runs."""
    base = cache_base()
    if stop(base, args.port):
        say(f"stopped the server on port {args.port}")
    else:
        say(f"no server of ours runs on port {args.port}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Exit 0 and print the URL if the server accepts connections."""
    base = cache_base()
    if not ready(base, args.port):
        say(f"no PostgreSQL accepts connections at 127.0.0.1:{args.port}")
        return 1
    print(url(args.port))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run a command."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, handler in (("up", cmd_up), ("down", cmd_down), ("status", cmd_status)):
        sub = commands.add_parser(name)
        sub.add_argument("--port", type=int, default=default_port(), help="TCP port on 127.0.0.1")
        sub.set_defaults(handler=handler)
    args = parser.parse_args(argv)
    if not 1024 <= args.port <= 65535:
        parser.error("--port must be between 1024 and 65535")
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
