"""Asking questions on a Ray cluster: connect, start one worker per CPU, hand out batches.

Ray is imported here only, and only when a run asks for ``executor="ray"``. Each worker
is a Ray actor holding `ray_worker.Worker`, which builds a retriever
once from its configuration and answers batches of questions; batches are handed to
whichever worker is free and put back in the set's order, so a run's outcomes are those
of the local run. Every way this can fail ends in one `EvaluationError` (exit code 3)
that says what happened, or an `InputError` (exit code 2) when Ray is not installed.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from retrievalkit.errors import EvaluationError, InputError, PluginError, RetrievalkitError
from retrievalkit.model.values import GoldenQuestion
from retrievalkit.pipeline.executors.ray.ray_worker import Answers, Build, Failure, Profile

#: Questions in one task: one ``retrieve_many`` group of the local run, so a batching
#: retriever sees exactly the groups it would see locally.
TASK_QUESTIONS = 64
#: Tasks queued on each worker beyond the one it is answering, so it never waits.
AHEAD = 1
#: How long the address may take to accept a connection before it counts as unreachable.
CONNECT_SECONDS = 5.0
INSTALL_HINT = "pip install 'retrievalkit-eval[ray]'"


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(
            "--executor ray needs Ray, which is not installed",
            field="--executor",
            hint=f"{INSTALL_HINT}, or leave --executor out to ask in this process",
        ) from None
    return ray


def address_of(address: str | None) -> str | None:
    """The cluster to use: ``address``, else ``RAY_ADDRESS``, else None (Ray starts a
    one-machine cluster for the run)."""
    chosen = address if address else os.environ.get("RAY_ADDRESS") or None
    return chosen.strip() if chosen else None


def _reachable(address: str) -> None:
    """Fail at once, with the address, when nothing listens there (Ray itself retries
    for tens of seconds before it gives up)."""
    text = address.removeprefix("ray://")
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(
            f"'{address}' is not a Ray address HOST:PORT",
            field="--ray-address",
            hint="e.g. 127.0.0.1:6379, the address `ray start --head` prints",
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS):
            pass
    except OSError as error:
        raise EvaluationError(
            f"could not reach the Ray cluster at {address} (--ray-address / RAY_ADDRESS): "
            f"{error.strerror or error}; start it with `ray start --head` or fix the address"
        ) from None


@contextmanager
def connected(address: str | None) -> Iterator[Any]:
    """Ray, connected to the cluster at ``address`` for the duration of the block (an
    existing connection of this process is used as it is and left open)."""
    ray = _ray()
    if ray.is_initialized():
        yield ray
        return
    chosen = address_of(address)
    if chosen is not None and chosen not in ("auto", "local"):
        _reachable(chosen)
    try:
        ray.init(
            address=chosen,
            log_to_driver=False,
            configure_logging=False,
            include_dashboard=False if chosen in (None, "local") else None,
        )
    except Exception as error:
        where = chosen or "a new local cluster"
        raise EvaluationError(
            f"could not connect to the Ray cluster at {where} (--ray-address / RAY_ADDRESS): "
            f"{_first_line(error)}"
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {line}" if line else type(error).__name__


class Pool:
    """One `Worker` actor per CPU of the cluster, asked in batches."""

    def __init__(self, ray: Any, workers: int | None = None) -> None:
        from retrievalkit.pipeline.executors.ray.ray_worker import Worker

        self.ray = ray
        count = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(Worker)
        self.actors = [actor.remote(os.getcwd()) for _ in range(count)]
        self._prepared: dict[str, Profile] = {}

    def prepare(self, key: str, build: Build, *, label: str, share: bool = False) -> Profile:
        """Build the retriever of ``key`` on every worker; its profile (from the first)."""
        if key in self._prepared:
            return self._prepared[key]
        shipped = self.ray.put(build)
        answers = self._get(
            [actor.prepare.remote(key, shipped, share) for actor in self.actors], label
        )
        for answer in answers:
            if isinstance(answer, Failure):
                raise _rebuilt(answer, label)
        profile: Profile = answers[0]
        self._prepared[key] = profile
        return profile

    def ask(
        self,
        jobs: Sequence[tuple[str, Sequence[GoldenQuestion]]],
        *,
        mode: str,
        depth: int,
        overfetch: int,
        timeout: float | None,
        concurrency: int,
        chunk_separator: str | None,
        label: str,
        progress: Callable[[int], None] | None = None,
    ) -> list[list[Answers]]:
        """Each job's (retriever key, questions) answers, in tasks of `TASK_QUESTIONS`
        handed to whichever worker is free; for each job, its tasks' answers in order."""
        ray = self.ray
        tasks = [
            (job, low, questions[low : low + TASK_QUESTIONS])
            for job, (_, questions) in enumerate(jobs)
            for low in range(0, len(questions), TASK_QUESTIONS)
        ]
        results: list[dict[int, Answers]] = [{} for _ in jobs]
        waiting = list(reversed(range(len(tasks))))
        running: dict[Any, tuple[int, Any]] = {}

        def submit(actor: Any) -> None:
            index = waiting.pop()
            job, _, chunk = tasks[index]
            key = jobs[job][0]
            reference = actor.ask.remote(
                key, chunk, mode, depth, overfetch, timeout, concurrency, chunk_separator
            )
            running[reference] = (index, actor)

        try:
            for _ in range(1 + AHEAD):
                for actor in self.actors:
                    if waiting:
                        submit(actor)
            while running:
                done, _ = ray.wait(list(running), num_returns=1)
                for reference in done:
                    index, actor = running.pop(reference)
                    job, low, chunk = tasks[index]
                    results[job][low] = self._get([reference], label)[0]
                    if progress is not None:
                        progress(len(chunk))
                    if waiting:
                        submit(actor)
        except BaseException:
            for reference in running:
                with contextlib.suppress(Exception):  # a dead worker's task is gone already
                    ray.cancel(reference)
            raise
        return [[parts[low] for low in sorted(parts)] for parts in results]

    def _get(self, references: list[Any], label: str) -> list[Any]:
        from ray import exceptions

        try:
            return list(self.ray.get(references))
        except exceptions.RayActorError as error:
            raise EvaluationError(
                f"a Ray worker died while asking the questions of '{label}' "
                f"({type(error).__name__}); the run was not saved "
                "(a retriever that exits its process, or a worker out of memory, ends its worker)"
            ) from None
        except exceptions.RayTaskError as error:
            cause = error.cause if isinstance(error.cause, BaseException) else error
            raise EvaluationError(
                f"'{label}' failed on a Ray worker: {_first_line(cause)}; the run was not saved"
            ) from None
        except exceptions.RayError as error:
            raise EvaluationError(
                f"Ray could not ask the questions of '{label}': {_first_line(error)}; "
                "the run was not saved"
            ) from None

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)


def _rebuilt(failure: Failure, label: str) -> RetrievalkitError:
    """The error a worker met building ``label``, of the class it had where it can be."""
    kinds: dict[str, type[RetrievalkitError]] = {
        "InputError": InputError,
        "PluginError": PluginError,
    }
    kind = kinds.get(failure.kind)
    if kind is InputError:
        return InputError(failure.message)
    if kind is PluginError:
        return PluginError(failure.message)
    return EvaluationError(
        f"retriever '{label}' could not be built on a Ray worker: {failure.message}"
    )


@contextmanager
def pool(address: str | None) -> Iterator[Pool]:
    """A `Pool` on the cluster at ``address``, its workers stopped at the end."""
    with connected(address) as ray:
        workers = Pool(ray)
        try:
            yield workers
        finally:
            workers.close()
