"""Fetch, start, check and stop local Elasticsearch built from Maven Central.

One node (``up --port 9200``) or a cluster of several on this machine (``up --nodes 3
--port 9210``: HTTP ports 9210-9212, transport ports 9310-9312, each node with its own
folder, discovering the others over loopback). ``down`` stops every node that ``up``
started on those ports; ``status`` prints the cluster's health.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

# The launchers run as scripts; what they share is in _service.py beside them.
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _service
from _service import chown_tree, is_root, port_in_use, traversable_by_others

ZIP_GROUP = "org.elasticsearch.distribution.integ-test-zip"
SERVER_GROUP = "org.elasticsearch"
ARTIFACT = "elasticsearch"
MVN_GET = [
    "mvn",
    "-B",
    "-ntp",
    "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:get",
    "-Dtransitive=false",
]
MVN_TIMEOUT = 1800.0
ES_USER = "retrievalkit-es"
JVM_DIR = Path("/usr/lib/jvm")
CLUSTER_NAME = "retrievalkit"
#: Several nodes form a cluster of this name (a single node keeps CLUSTER_NAME).
MULTI_CLUSTER_NAME = "retrievalkit-cluster"
#: Heap of a single node, and of each node of a cluster (three share a 2-core machine).
SINGLE_HEAP = "1g"
CLUSTER_HEAP = "512m"
HEAP_RE = re.compile(r"^\d+[mg]$")
MAX_NODES = 9
TRANSPORT_OFFSET = 100
PROBES_PER_MAJOR = 8
STOP_WAIT = 30.0
LOG_TAIL = 60
VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
#: ``up --security``: the superuser's name and password come from these variables (the
#: password never from the command line); ``request`` sends them when the password is set.
USER_ENV = "RETRIEVALKIT_ES_USER"
PASSWORD_ENV = "RETRIEVALKIT_ES_PASSWORD"
DEFAULT_USER = "retrievalkit"


@dataclass(frozen=True)
class Jdk:
    """A Java installation found on this machine."""

    major: int
    home: Path


def say(message: str) -> None:
    """Print a progress or status line to stderr."""
    print(f"[elasticsearch] {message}", file=sys.stderr, flush=True)


def cache_base() -> Path:
    """The folder that holds this service's installation and its per-port folders."""
    return _service.cache_base("elasticsearch", "RETRIEVALKIT_ES_HOME")


def ensure_user() -> tuple[int, int] | None:
    """Create the unprivileged server user when root; its (uid, gid), or None if not root."""
    return _service.ensure_user(ES_USER, say)


def vkey(version: str) -> tuple[int, ...]:
    """Sort key for an X.Y.Z version."""
    return tuple(int(part) for part in version.split("."))


def default_port() -> int:
    """The HTTP port from RETRIEVALKIT_ES_PORT, or 9200."""
    return int(os.environ.get("RETRIEVALKIT_ES_PORT") or 9200)


def maven_repo() -> Path:
    """Maven's local repository (settings.xml localRepository, else ~/.m2/repository)."""
    settings = Path.home() / ".m2" / "settings.xml"
    if settings.is_file():
        found = re.search(
            r"<localRepository>\s*([^<\s]+)\s*</localRepository>", settings.read_text()
        )
        if found:
            return Path(found.group(1).replace("${user.home}", str(Path.home()))).expanduser()
    return Path.home() / ".m2" / "repository"


def artifact_dir(group: str) -> Path:
    """The local repository folder of group:elasticsearch."""
    return maven_repo() / Path(*group.split(".")) / ARTIFACT


def zip_path(version: str) -> Path:
    """Where Maven keeps the integ-test zip of version."""
    return artifact_dir(ZIP_GROUP) / version / f"{ARTIFACT}-{version}.zip"


def mvn_get(coords: str) -> subprocess.CompletedProcess[str]:
    """Run maven-dependency-plugin:get for coords, output captured."""
    if shutil.which("mvn") is None:
        raise SystemExit("[elasticsearch] mvn is not on PATH (apt-get install maven)")
    return subprocess.run(
        [*MVN_GET, f"-Dmaven.repo.local={maven_repo()}", f"-Dartifact={coords}"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=MVN_TIMEOUT,
        check=False,
        cwd=Path.home() if Path.home().is_dir() else "/",
    )


def fetch_zip(version: str) -> Path | None:
    """Return the cached integ-test zip of version, downloading it with Maven if needed."""
    path = zip_path(version)
    if path.is_file():
        return path
    say(f"fetching {ZIP_GROUP}:{ARTIFACT}:{version}:zip with Maven")
    started = time.monotonic()
    result = mvn_get(f"{ZIP_GROUP}:{ARTIFACT}:{version}:zip")
    if result.returncode == 0 and path.is_file():
        size = path.stat().st_size / 2**20
        say(f"downloaded {version} ({size:.0f} MiB) in {time.monotonic() - started:.1f} s")
        return path
    errors = [line for line in result.stdout.splitlines() if line.startswith("[ERROR]")]
    detail = errors[0].split("artifact: ", 1)[-1][:160] if errors else result.stderr[-160:]
    say(f"{version}: not fetched ({detail.strip() or 'mvn failed'})")
    return None


def served_versions() -> list[str]:
    """Release versions that Central's metadata lists, newest first.

    The integ-test zip's own metadata stops at 8.x although 9.x zips are served, so
    the server jar's metadata (same release train) adds the 9.x candidates.
    """
    versions: set[str] = set()
    for group in (ZIP_GROUP, SERVER_GROUP):
        mvn_get(f"{group}:{ARTIFACT}:RELEASE:pom")  # refreshes maven-metadata-*.xml
        for meta in artifact_dir(group).glob("maven-metadata-*.xml"):
            versions.update(re.findall(r"<version>([^<]+)</version>", meta.read_text()))
    return sorted((v for v in versions if VERSION_RE.match(v)), key=vkey, reverse=True)


def unpack(version: str, archive: Path, base: Path) -> Path:
    """Unpack the zip once into base/version and return the distribution's home."""
    home = base / version / f"elasticsearch-{version}"
    if (home / "bin" / "elasticsearch").is_file():
        return home
    staging = base / version / ".unpacking"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with zipfile.ZipFile(archive) as bundle:
        for member in bundle.infolist():
            target = staging / member.filename
            if not target.resolve().is_relative_to(staging.resolve()):
                raise SystemExit(f"[elasticsearch] unsafe path in {archive}: {member.filename}")
            bundle.extract(member, staging)
            mode = (member.external_attr >> 16) & 0o777
            if member.is_dir():
                target.chmod(0o755)
            else:
                target.chmod(0o755 if mode & 0o111 else 0o644)
    extracted = staging / f"elasticsearch-{version}"
    if not (extracted / "bin" / "elasticsearch").is_file():
        raise SystemExit(
            f"[elasticsearch] {archive} has no elasticsearch-{version}/bin/elasticsearch"
        )
    extracted.rename(home)
    shutil.rmtree(staging, ignore_errors=True)
    for folder in [home, *home.parents]:
        if folder == base.parent:
            break
        folder.chmod(folder.stat().st_mode | 0o755)
    return home


def java_major(home: Path) -> int | None:
    """The feature version of the JDK at home, or None if it is not a JDK."""
    java = home / "bin" / "java"
    if not java.is_file():
        return None
    release = home / "release"
    if release.is_file():
        found = re.search(r'^JAVA_VERSION="(\d+)', release.read_text(), re.MULTILINE)
        if found:
            return int(found.group(1))
    result = subprocess.run([str(java), "-version"], capture_output=True, text=True, check=False)
    found = re.search(r'version "(\d+)', result.stderr)
    return int(found.group(1)) if found else None


def find_jdks() -> list[Jdk]:
    """JDKs under /usr/lib/jvm (or ES_JAVA_HOME alone when the caller set it)."""
    homes = [Path(os.environ["ES_JAVA_HOME"])] if os.environ.get("ES_JAVA_HOME") else []
    if not homes and JVM_DIR.is_dir():
        homes = sorted(JVM_DIR.iterdir())
    jdks: dict[Path, Jdk] = {}
    for home in homes:
        real = home.resolve()
        major = java_major(real) if real.is_dir() else None
        if major is not None:
            jdks[real] = Jdk(major, real)
    return list(jdks.values())


def jdks_for(version: str) -> list[Jdk]:
    """JDKs that may run version, most suitable first (9.x: newest >= 21; 8.x: 17 first)."""
    jdks = find_jdks()
    if vkey(version)[0] >= 9:
        return sorted((j for j in jdks if j.major >= 21), key=lambda j: -j.major)
    return sorted((j for j in jdks if j.major >= 17), key=lambda j: (j.major != 17, j.major))


def credentials() -> tuple[str, str] | None:
    """(user, password) from $RETRIEVALKIT_ES_USER and $RETRIEVALKIT_ES_PASSWORD, if set."""
    password = os.environ.get(PASSWORD_ENV)
    return (os.environ.get(USER_ENV) or DEFAULT_USER, password) if password else None


def request(port: int, path: str, timeout: float = 5.0) -> dict[str, object] | None:
    """GET a JSON document from the node, or None on any failure.

    With $RETRIEVALKIT_ES_PASSWORD set the request carries basic authentication, which a
    node started with ``--security`` requires and any other node ignores.
    """
    headers = {}
    login = credentials()
    if login:
        token = base64.b64encode(":".join(login).encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    query = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(query, timeout=timeout) as response:
            data = json.loads(response.read().decode())
    except (OSError, ValueError, http.client.HTTPException):
        # HTTPException: something else (another node's transport port) answers there.
        return None
    return data if isinstance(data, dict) else None


def healthy_version(port: int, wait: float = 0.0) -> str | None:
    """The node's version if its cluster health is yellow or green, else None."""
    query = f"?wait_for_status=yellow&timeout={max(int(wait), 1)}s" if wait else ""
    health = request(port, f"/_cluster/health{query}", timeout=wait + 5.0)
    if not health or health.get("status") not in ("yellow", "green"):
        return None
    # GET / lives in a module the integ-test zip lacks, so ask the nodes API instead.
    nodes = request(port, "/_nodes/_local?filter_path=nodes.*.version")
    entries = nodes.get("nodes") if nodes else None
    if isinstance(entries, dict):
        for node in entries.values():
            version = node.get("version") if isinstance(node, dict) else None
            if isinstance(version, str):
                return version
    return "unknown"


def node_dir(base: Path, port: int) -> Path:
    """The per-port folder with config, data, logs, tmp and the pid file."""
    return base / "nodes" / str(port)


def pid_file(base: Path, port: int) -> Path:
    """The pid file the node writes."""
    return node_dir(base, port) / "run" / "elasticsearch.pid"


def cmdline(pid: int) -> list[str]:
    """The command line of pid, or [] if it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def node_pids(base: Path, port: int) -> list[int]:
    """Live pids of our node on port: the pid file's, and any JVM using its tmp folder."""
    marker = f"-Djava.io.tmpdir={node_dir(base, port) / 'tmp'}"
    pids = {
        int(proc.name)
        for proc in Path("/proc").iterdir()
        if proc.name.isdigit() and marker in cmdline(int(proc.name))
    }
    try:
        recorded = int(pid_file(base, port).read_text().strip())
    except (OSError, ValueError):
        recorded = 0
    if recorded > 0 and any("elasticsearch" in arg for arg in cmdline(recorded)):
        pids.add(recorded)
    return sorted(pid for pid in pids if alive(pid))


def alive(pid: int) -> bool:
    """Whether pid runs (zombies count as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop(base: Path, port: int) -> bool:
    """SIGTERM our node on port, wait, then SIGKILL; True if one was running."""
    pids = node_pids(base, port)
    for pid in pids:
        say(f"stopping pid {pid} (SIGTERM)")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in pids:
        if alive(pid):
            say(f"pid {pid} still running after {STOP_WAIT:.0f} s: SIGKILL")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    pid_file(base, port).unlink(missing_ok=True)
    return bool(pids)


def log_tail(base: Path, port: int) -> str:
    """The last lines of the launcher's console output and of the node log."""
    folder = node_dir(base, port)
    parts: list[str] = []
    logs = sorted((folder / "logs").glob("*.log")) if (folder / "logs").is_dir() else []
    # The server log is named after the cluster; GC and deprecation logs are not wanted.
    server = [p for p in logs if p.stem in (CLUSTER_NAME, MULTI_CLUSTER_NAME)]
    for path, count in [(folder / "console.log", 20), *((p, LOG_TAIL) for p in server)]:
        if path.is_file() and path.stat().st_size:
            lines = path.read_text(errors="replace").splitlines()[-count:]
            parts.append(f"--- last {len(lines)} lines of {path} ---\n" + "\n".join(lines))
    return "\n".join(parts) or f"--- nothing logged under {folder} yet ---"


ENGLISH_PLUGIN = "retrievalkit-english-analysis"
ENGLISH_SOURCE = Path(__file__).resolve().parent / "es-english-analysis" / "src"


def install_english_analysis(home: Path, jdk: Jdk) -> None:
    """Compile and install the small plugin that registers the ``english`` analyzer.

    The integ-test zip lacks the analysis-common module; the plugin is built here from
    its source against the distribution's own jars, once per distribution and source.
    """
    sources = sorted(ENGLISH_SOURCE.rglob("*.java"))
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in sources)).hexdigest()[:16]
    target = home / "plugins" / ENGLISH_PLUGIN
    stamp = target / "source.sha256"
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return
    javac = jdk.home / "bin" / "javac"
    if not javac.is_file():
        say(f"no javac in {jdk.home}: the english analyzer will be missing")
        return
    version = home.name.removeprefix("elasticsearch-")
    with tempfile.TemporaryDirectory() as scratch:
        classes = Path(scratch) / "classes"
        compiled = subprocess.run(
            [str(javac), "-nowarn", "-cp", str(home / "lib" / "*"), "-d", str(classes)]
            + [str(path) for path in sources],
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled.returncode != 0:
            say("could not build the english analyzer plugin:\n" + compiled.stderr[-2000:])
            return
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        jar = target / f"{ENGLISH_PLUGIN}.jar"
        with zipfile.ZipFile(jar, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
    (target / "plugin-descriptor.properties").write_text(
        "description=Lucene's EnglishAnalyzer as the pre-built 'english' analyzer\n"
        f"version={version}\n"
        f"name={ENGLISH_PLUGIN}\n"
        "classname=org.retrievalkit.analysis.EnglishAnalysisPlugin\n"
        f"java.version={jdk.major}\n"
        f"elasticsearch.version={version}\n"
    )
    stamp.write_text(digest + "\n")
    for path in [target, *target.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    say(f"installed the english analyzer plugin into {target}")


def install_rank_eval_module(home: Path, version: str) -> bool:
    """Add the rank-eval module to a 7.x distribution from its jar on Maven Central.

    Elastic published each 7.x module jar as ``org.elasticsearch.plugin:rank-eval-client``
    (for the transport client); 8.x and 9.x are not on Central, which is why the
    ``_rank_eval`` parity node is a 7.17 release.
    """
    target = home / "modules" / "rank-eval"
    jar = target / f"rank-eval-client-{version}.jar"
    if jar.is_file():
        return True
    coords = f"org.elasticsearch.plugin:rank-eval-client:{version}"
    if mvn_get(coords).returncode != 0:
        say(f"could not fetch {coords} from Maven Central")
        return False
    source = maven_repo() / "org/elasticsearch/plugin/rank-eval-client" / version / jar.name
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, jar)
    (target / "plugin-descriptor.properties").write_text(
        "description=The Rank Eval module adds APIs to evaluate ranking quality.\n"
        f"version={version}\n"
        "name=rank-eval\n"
        "classname=org.elasticsearch.index.rankeval.RankEvalPlugin\n"
        "java.version=1.8\n"
        f"elasticsearch.version={version}\n"
        "extended.plugins=\n"
        "has.native.controller=false\n"
    )
    for path in [target, *target.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    say(f"installed the rank-eval module {version} into {target}")
    return True


def write_file_realm(config: Path, login: tuple[str, str]) -> None:
    """A file-realm superuser (salted SHA-256, a hash Elasticsearch's file realm reads)."""
    user, password = login
    salt = os.urandom(8)
    hashed = base64.b64encode(hashlib.sha256(password.encode() + salt).digest()).decode()
    (config / "users").write_text(f"{user}:{{SSHA256}}{base64.b64encode(salt).decode()}{hashed}\n")
    (config / "users_roles").write_text(f"superuser:{user}\n")


@dataclass(frozen=True)
class Layout:
    """Which nodes to start: their HTTP ports (transport: each + 100) and each one's heap."""

    ports: tuple[int, ...]
    heap: str

    @property
    def cluster(self) -> bool:
        return len(self.ports) > 1

    @property
    def name(self) -> str:
        return MULTI_CLUSTER_NAME if self.cluster else CLUSTER_NAME

    def describe(self) -> str:
        if not self.cluster:
            return f"port {self.ports[0]}"
        return f"{len(self.ports)} nodes on ports {self.ports[0]}-{self.ports[-1]}"


def layout_for(port: int, nodes: int, heap: str | None) -> Layout:
    """Nodes on port, port + 1, ...; the heap given, else 1g alone or 512m each in a cluster."""
    return Layout(
        tuple(range(port, port + nodes)), heap or (CLUSTER_HEAP if nodes > 1 else SINGLE_HEAP)
    )


def members_file(base: Path, port: int) -> Path:
    """The file, in the first node's folder, that lists the HTTP ports of its cluster."""
    return node_dir(base, port) / "cluster.json"


def members(base: Path, port: int) -> list[int]:
    """The HTTP ports of the cluster whose first node is on port (just port if none)."""
    try:
        ports = json.loads(members_file(base, port).read_text())["ports"]
        return [int(p) for p in ports]
    except (OSError, ValueError, KeyError, TypeError):
        return [port]


def cluster_healthy(port: int, nodes: int, wait: float = 0.0) -> dict[str, object] | None:
    """Cluster health through port when it is yellow or green with at least `nodes` nodes."""
    query = f"?wait_for_status=yellow&wait_for_nodes=>={nodes}&timeout={max(int(wait), 1)}s"
    health = request(port, f"/_cluster/health{query if wait else ''}", timeout=wait + 5.0)
    if not health or health.get("status") not in ("yellow", "green"):
        return None
    count = health.get("number_of_nodes")
    return health if isinstance(count, int) and count >= nodes else None


def prepare_node(base: Path, home: Path, port: int) -> Path:
    """A fresh folder for the node on port: config copied from home, data, logs, run, tmp."""
    folder = node_dir(base, port)
    shutil.rmtree(folder, ignore_errors=True)
    for sub in ("data", "logs", "run", "tmp"):
        (folder / sub).mkdir(parents=True)
    folder.parent.chmod(0o755)
    shutil.copytree(home / "config", folder / "config")
    jvm_options = folder / "config" / "jvm.options"
    if jvm_options.is_file():
        # 7.x names its GC log, error file and heap dumps relative to a working directory
        # the node's user cannot write; point them into the node folder.
        text = jvm_options.read_text()
        text = text.replace("file=logs/", f"file={folder}/logs/")
        text = text.replace("ErrorFile=logs/", f"ErrorFile={folder}/logs/")
        text = text.replace("HeapDumpPath=data", f"HeapDumpPath={folder}/data")
        jvm_options.write_text(text)
    return folder


def node_settings(layout: Layout, port: int, folder: Path) -> dict[str, str]:
    """The ``-E`` settings of the node on port: alone, or discovering the layout's others."""
    settings = {
        "cluster.name": layout.name,
        "node.name": f"{CLUSTER_NAME}-{port}",
        "network.host": "127.0.0.1",
        "http.port": str(port),
        "transport.port": str(port + TRANSPORT_OFFSET),
        "path.data": str(folder / "data"),
        "path.logs": str(folder / "logs"),
        "cluster.routing.allocation.disk.threshold_enabled": "false",
        "node.store.allow_mmap": "false",
        "action.destructive_requires_name": "false",
    }
    if layout.cluster:
        # Every node is master-eligible; the data folders are fresh on each start, so the
        # cluster bootstraps anew from these names every time.
        settings["discovery.seed_hosts"] = ",".join(
            f"127.0.0.1:{p + TRANSPORT_OFFSET}" for p in layout.ports
        )
        settings["cluster.initial_master_nodes"] = ",".join(
            f"{CLUSTER_NAME}-{p}" for p in layout.ports
        )
    else:
        settings["discovery.type"] = "single-node"
    return settings


def start(
    base: Path, home: Path, jdk: Jdk, layout: Layout, timeout: float, *, secure: bool = False
) -> str | None:
    """Start fresh nodes and wait for yellow; return the version, or None (logs printed).

    The nodes of a cluster are launched at the same time: each one's start-up waits for
    the others to form the cluster. ``secure`` turns security on (one node, plain HTTP, a
    file-realm superuser from $RETRIEVALKIT_ES_USER / $RETRIEVALKIT_ES_PASSWORD), for
    tests of credentials.
    """
    if vkey(home.name.removeprefix("elasticsearch-"))[0] >= 8:
        install_english_analysis(home, jdk)
    login = credentials()
    if secure and (
        login is None or not (home / "modules" / "x-pack-security").is_dir() or layout.cluster
    ):
        say(f"--security needs ${PASSWORD_ENV}, a distribution with x-pack-security and one node")
        return None
    ids = ensure_user()
    commands: dict[int, list[str]] = {}
    for port in layout.ports:
        folder = prepare_node(base, home, port)
        if secure and login is not None:
            write_file_realm(folder / "config", login)
        chown_tree(folder, ids)
        settings = node_settings(layout, port, folder)
        if (home / "modules" / "x-pack-security").is_dir():
            # Without this the node enables security and answers 401 to plain HTTP.
            settings["xpack.security.enabled"] = "true" if secure else "false"
        command = [str(home / "bin" / "elasticsearch"), "-d", "-p", str(pid_file(base, port))]
        for key, value in settings.items():
            command += ["-E", f"{key}={value}"]
        commands[port] = command
    if layout.cluster:
        members_file(base, layout.ports[0]).write_text(
            json.dumps({"ports": list(layout.ports)}) + "\n"
        )
    say(
        f"starting {home.name} on {layout.describe()} with Java {jdk.major} ({jdk.home}), "
        f"heap {layout.heap} each"
    )
    started = time.monotonic()
    launchers: dict[int, subprocess.Popen[bytes]] = {}
    for port, command in commands.items():
        folder = node_dir(base, port)
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("JAVA_HOME", "ES_JAVA_OPTS")
        }
        env.update(
            ES_JAVA_HOME=str(jdk.home),
            ES_JAVA_OPTS=f"-Xms{layout.heap} -Xmx{layout.heap}",
            ES_PATH_CONF=str(folder / "config"),
            ES_TMPDIR=str(folder / "tmp"),
            HOME=str(folder),
        )
        with open(folder / "console.log", "wb") as console:
            launchers[port] = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=folder,
                env=env,
                start_new_session=True,
                user=ids[0] if ids else None,
                group=ids[1] if ids else None,
                extra_groups=[] if ids else None,
            )
    codes: dict[int, int | None] = {}
    for port, launcher in launchers.items():
        try:
            codes[port] = launcher.wait(timeout=max(timeout - (time.monotonic() - started), 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
            codes[port] = None
    failed = {port: code for port, code in codes.items() if code != 0}
    version = None
    if not failed:
        remaining = timeout - (time.monotonic() - started)
        while version is None and remaining > 0:
            if cluster_healthy(layout.ports[0], len(layout.ports), wait=min(remaining, 10.0)):
                version = healthy_version(layout.ports[0])
            remaining = timeout - (time.monotonic() - started)
    if version is None:
        if failed:
            reason = "; ".join(
                f"port {port}: " + ("timed out" if code is None else f"launcher exit code {code}")
                for port, code in failed.items()
            )
        else:
            reason = "never became healthy"
            if layout.cluster:
                reason = f"the {len(layout.ports)} nodes never formed a healthy cluster"
        say(f"start-up failed ({reason}) after {time.monotonic() - started:.1f} s")
        # The node that failed first is the one to read; the others' logs say what they saw.
        for port in sorted(layout.ports, key=lambda p: p not in failed):
            print(log_tail(base, port), file=sys.stderr, flush=True)
        for port in layout.ports:
            stop(base, port)
        return None
    say(
        f"Elasticsearch {version} is up on {layout.describe()} after "
        f"{time.monotonic() - started:.1f} s"
    )
    return version


def selection_file(base: Path) -> Path:
    """Where the version known to work (and its JDK) is recorded."""
    return base / "selected.json"


def read_selection(base: Path) -> tuple[str, Path] | None:
    """The recorded (version, java home), if any and still usable."""
    try:
        data = json.loads(selection_file(base).read_text())
        version, java = str(data["version"]), Path(data["java_home"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (version, java) if VERSION_RE.match(version) and java_major(java) else None


def record_selection(base: Path, version: str, jdk: Jdk) -> None:
    """Remember the version that started, so later runs skip the probing."""
    data = {"version": version, "java_home": str(jdk.home), "java_major": jdk.major}
    selection_file(base).write_text(json.dumps(data, indent=2) + "\n")
    say(f"recorded Elasticsearch {version} with Java {jdk.major} in {selection_file(base)}")


def try_version(
    base: Path, version: str, jdks: list[Jdk], layout: Layout, timeout: float, *, secure: bool
) -> tuple[str, Jdk] | None:
    """Fetch, unpack and start version with each JDK in turn; return what worked."""
    if not jdks:
        say(f"no suitable JDK (ES_JAVA_HOME or under {JVM_DIR}) for Elasticsearch {version}")
        return None
    archive = fetch_zip(version)
    if archive is None:
        return None
    home = unpack(version, archive, base)
    if vkey(version)[0] == 7 and not install_rank_eval_module(home, version):
        return None
    for jdk in jdks:
        if start(base, home, jdk, layout, timeout, secure=secure):
            return version, jdk
    return None


def discover_and_start(
    base: Path, layout: Layout, timeout: float, *, secure: bool
) -> tuple[str, Jdk] | None:
    """Start the newest served 9.x on Java >= 21, else the newest served 8.x on Java 17."""
    served = served_versions()
    for major in (9, 8):
        candidates = [v for v in served if vkey(v)[0] == major][:PROBES_PER_MAJOR]
        say(f"{major}.x candidates from Central's metadata: {', '.join(candidates) or 'none'}")
        for version in candidates:
            jdks = jdks_for(version)
            if not jdks:
                say(f"no JDK that can run {major}.x: skipping it")
                break
            if zip_path(version).is_file() or fetch_zip(version):
                result = try_version(base, version, jdks, layout, timeout, secure=secure)
                if result:
                    return result
                break  # the newest served release of this major does not run: try the next major
    return None


def running_cluster(base: Path, layout: Layout, timeout: float) -> int | None:
    """Exit code for `up` when some of the layout's nodes are ours and run already, else None.

    Healthy with every node: 0. Ours but not (yet) healthy: wait up to timeout, then print
    the log tails and 1.
    """
    url = f"http://127.0.0.1:{layout.ports[0]}"
    count = len(layout.ports)
    if cluster_healthy(layout.ports[0], count):
        version = healthy_version(layout.ports[0])
        say(f"Elasticsearch {version} already running and healthy on {layout.describe()}")
        print(url)
        return 0
    if not any(node_pids(base, port) for port in layout.ports):
        return None
    say("our nodes are running but not healthy yet: waiting")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        wait = min(10.0, max(deadline - time.monotonic(), 1.0))
        if cluster_healthy(layout.ports[0], count, wait=wait):
            say(f"Elasticsearch {healthy_version(layout.ports[0])} healthy on {layout.describe()}")
            print(url)
            return 0
    for port in layout.ports:
        print(log_tail(base, port), file=sys.stderr)
    say("the nodes never became healthy; run `down` and `up` again")
    return 1


def cmd_up(args: argparse.Namespace) -> int:
    """Start the node, or the cluster's nodes, unless already healthy."""
    base = cache_base()
    layout = layout_for(args.port, args.nodes, args.heap)
    url = f"http://127.0.0.1:{args.port}"
    running = running_cluster(base, layout, args.timeout)
    if running is not None:
        return running
    taken = [
        str(p) for port in layout.ports for p in (port, port + TRANSPORT_OFFSET) if port_in_use(p)
    ]
    if taken:
        say(f"port(s) {', '.join(taken)} on 127.0.0.1 taken by another process")
        return 1
    base.mkdir(parents=True, exist_ok=True)
    if is_root():
        base.chmod(base.stat().st_mode | 0o755)
        if not traversable_by_others(base):
            say(f"{base} must be reachable by user {ES_USER}: choose another RETRIEVALKIT_ES_HOME")
            return 1
    secure = bool(args.security)
    if secure and credentials() is None:
        say(f"--security needs the superuser's password in ${PASSWORD_ENV} (user: ${USER_ENV})")
        return 2
    if secure and layout.cluster:
        say("--security starts one node only (a cluster with security needs transport TLS)")
        return 2
    pinned = args.version if args.version != "auto" else os.environ.get("RETRIEVALKIT_ES_VERSION")
    recorded = read_selection(base)
    if pinned:
        if not VERSION_RE.match(pinned):
            say(f"--version must be auto or X.Y.Z, not {pinned!r}")
            return 2
        result = try_version(base, pinned, jdks_for(pinned), layout, args.timeout, secure=secure)
    elif recorded:
        version, java = recorded
        preferred = [j for j in jdks_for(version) if j.home == java.resolve()]
        others = [j for j in jdks_for(version) if j.home != java.resolve()]
        result = try_version(base, version, preferred + others, layout, args.timeout, secure=secure)
    else:
        result = discover_and_start(base, layout, args.timeout, secure=secure)
        if result:
            record_selection(base, *result)
    if not result:
        say("could not start Elasticsearch")
        return 1
    version, jdk = result
    say(f"Elasticsearch {version} on Java {jdk.major} ({jdk.home}) at {url}")
    for port in layout.ports:
        say(f"node folder (data, logs, pid file): {node_dir(base, port)}")
    print(url)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    """Stop the node on the port, and the other nodes of its cluster, if they run."""
    base = cache_base()
    ports = sorted({*members(base, args.port), *range(args.port, args.port + args.nodes)})
    stopped = [port for port in ports if stop(base, port)]
    members_file(base, args.port).unlink(missing_ok=True)
    if stopped:
        say(f"stopped the node(s) on port(s) {', '.join(map(str, stopped))}")
    else:
        say(f"no node of ours runs on port(s) {', '.join(map(str, ports))}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print the version and the cluster's health; exit 0 if healthy with --nodes nodes."""
    url = f"http://127.0.0.1:{args.port}"
    version = healthy_version(args.port)
    health = cluster_healthy(args.port, args.nodes) if version else None
    if not version or health is None:
        say(f"no healthy Elasticsearch with {args.nodes} node(s) at {url}")
        return 1
    print(f"{version} {url}")
    if args.nodes > 1 or health.get("number_of_nodes") != 1:
        print(
            f"cluster {health.get('cluster_name')}: {health.get('status')}, "
            f"{health.get('number_of_nodes')} nodes, {health.get('active_primary_shards')} "
            f"primary and {health.get('active_shards')} active shards, "
            f"{health.get('unassigned_shards')} unassigned"
        )
        nodes = request(args.port, "/_nodes/http?filter_path=nodes.*.name,nodes.*.http")
        entries = nodes.get("nodes") if nodes else None
        if isinstance(entries, dict):
            for node in sorted(entries.values(), key=lambda n: str(n.get("name"))):
                address = (node.get("http") or {}).get("publish_address", "?")
                print(f"  {node.get('name')} http {address}")
    return 0


def heap_size(text: str) -> str:
    """``--heap``: a JVM size such as 512m or 1g."""
    if not HEAP_RE.match(text):
        raise argparse.ArgumentTypeError(f"expected a size such as 512m or 1g, not {text!r}")
    return text


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run a command."""
    parser = argparse.ArgumentParser(description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, handler in (("up", cmd_up), ("down", cmd_down), ("status", cmd_status)):
        sub = commands.add_parser(name)
        sub.add_argument(
            "--port",
            type=int,
            default=default_port(),
            help="HTTP port of the (first) node; transport: port+100",
        )
        sub.add_argument(
            "--nodes",
            type=int,
            default=1,
            help=f"nodes of one cluster, on ports port .. port+N-1 (1 to {MAX_NODES}; default 1)",
        )
        sub.set_defaults(handler=handler)
        if name == "up":
            sub.add_argument("--version", default="auto", help="auto (default) or X.Y.Z")
            sub.add_argument(
                "--heap",
                type=heap_size,
                help=f"JVM heap of each node (default {SINGLE_HEAP} alone, "
                f"{CLUSTER_HEAP} each in a cluster)",
            )
            sub.add_argument(
                "--security",
                action="store_true",
                help=f"turn security on: a superuser ${USER_ENV} (default {DEFAULT_USER}) with "
                f"the password in ${PASSWORD_ENV}; plain HTTP (for tests of credentials)",
            )
            sub.add_argument(
                "--timeout", type=float, default=180.0, help="seconds to wait for start-up"
            )
    args = parser.parse_args(argv)
    if not 1 <= args.nodes <= MAX_NODES:
        parser.error(f"--nodes must be between 1 and {MAX_NODES}")
    if not 1024 <= args.port <= 65535 - TRANSPORT_OFFSET - args.nodes + 1:
        parser.error("--port must be between 1024 and 65435 (minus the other nodes)")
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
