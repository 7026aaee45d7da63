"""What the service launchers (elasticsearch.py, postgres.py) share: the unprivileged user
a server runs as when the launcher runs as root, the cache folder, and the port check.

The launchers are run as scripts (``python3 scripts/postgres.py up``), so this module is
imported from their own folder.
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path


def is_root() -> bool:
    """Whether we run as root (and so must run the server as another user)."""
    return os.geteuid() == 0


def traversable_by_others(path: Path) -> bool:
    """Whether every existing ancestor of path lets other users through."""
    for part in [path, *path.parents]:
        if part.exists() and not part.stat().st_mode & 0o001:
            return False
    return True


def cache_base(service: str, home_env: str) -> Path:
    """The folder a service keeps its installation and server folders in: $``home_env``,
    else the user's cache folder, else (as root with a cache other users cannot enter)
    /var/cache/retrievalkit/``service``."""
    explicit = os.environ.get(home_env)
    if explicit:
        return Path(explicit).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    base = Path(xdg).expanduser().resolve() / "retrievalkit" / service
    if is_root() and not traversable_by_others(base):
        # The server runs as an unprivileged user, which cannot enter a 0700 /root.
        return Path("/var/cache/retrievalkit") / service
    return base


def ensure_user(name: str, say: Callable[[str], None]) -> tuple[int, int] | None:
    """Create the unprivileged user ``name`` when root; its (uid, gid), or None if not root."""
    if not is_root():
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        say(f"creating system user {name}")
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
            stdin=subprocess.DEVNULL,
        )
        entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def chown_tree(root: Path, ids: tuple[int, int] | None) -> None:
    """Give root and everything below it to the server user (nothing when ids is None)."""
    if ids is None:
        return
    os.chown(root, *ids)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), *ids, follow_symlinks=False)


def port_in_use(port: int) -> bool:
    """Whether something listens on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0
