"""Read a ``[sweeps.NAME]`` table of the configuration into a checked `SweepConfig`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from retrievalkit.errors import InputError

#: The metric a sweep maximises when its table names none.
DEFAULT_SELECT = "rr"
#: The share of the set's questions held out to confirm the winner when neither
#: ``confirm`` nor ``folds`` is given.
DEFAULT_CONFIRM = 0.3
#: The seed of the split when the table gives none (the intervals' default seed).
DEFAULT_SPLIT_SEED = 20240601

KEYS = ("retriever", "grid", "select", "confirm", "folds", "seed", "halving")
#: The largest magnitude of a number a grid may try: past it a value is a typo (``1e308``,
#: a stray exponent), never a retriever setting.
MAX_GRID_NUMBER = 1e15


@attrs.frozen
class SweepConfig:
    """One ``[sweeps.NAME]``: the retriever to tune, the grid of options, how to choose.

    ``grid`` maps an option (dotted names reach nested retrievers: ``lexical.k1`` is the
    option ``k1`` of the configured retriever ``lexical`` that the swept one uses) to the
    values to try, in the table's order. ``confirm`` is the held-out share (None with
    ``folds``); ``halving`` is None for automatic (on past a size of grid).
    """

    name: str
    retriever: str
    grid: Mapping[str, tuple[Any, ...]]
    select: str = DEFAULT_SELECT
    confirm: float | None = DEFAULT_CONFIRM
    folds: int | None = None
    seed: int = DEFAULT_SPLIT_SEED
    halving: bool | None = None

    @property
    def size(self) -> int:
        """How many configurations the grid holds."""
        total = 1
        for values in self.grid.values():
            total *= len(values)
        return total


def parse_sweeps(
    section: Mapping[str, Any], fail: Callable[..., InputError]
) -> dict[str, SweepConfig]:
    """Every ``[sweeps.NAME]``; ``fail(key, message, hint)`` builds the error naming the key."""
    sweeps: dict[str, SweepConfig] = {}
    for name, entry in section.items():
        where = f"sweeps.{name}"
        if not isinstance(entry, Mapping):
            raise fail(where, "must be a table")
        for key in entry:
            if key not in KEYS:
                raise fail(f"{where}.{key}", "unknown key", hint="known: " + ", ".join(KEYS))
        sweeps[name] = _parse_one(name, entry, where, fail)
    return sweeps


def _parse_one(
    name: str, entry: Mapping[str, Any], where: str, fail: Callable[..., InputError]
) -> SweepConfig:
    from retrievalkit.metrics.definitions import parse_metric

    retriever = entry.get("retriever")
    if not isinstance(retriever, str) or not retriever:
        raise fail(
            f"{where}.retriever",
            "missing or not a string",
            hint='name the [retrievers.NAME] to tune, e.g. retriever = "hybrid"',
        )
    grid = entry.get("grid")
    if not isinstance(grid, Mapping) or not grid:
        raise fail(
            f"{where}.grid",
            "needs a table of option = [values to try]",
            hint="e.g. grid = { k = [10, 60], depth = [50, 100] }",
        )
    values: dict[str, tuple[Any, ...]] = {}
    for option, tried in grid.items():
        problem = grid_problem(str(option), tried)
        if problem is not None:
            raise fail(f"{where}.grid.{option}", *problem)
        values[str(option)] = tuple(tried)
    select = entry.get("select", DEFAULT_SELECT)
    try:
        select = parse_metric(str(select)).name
    except ValueError as error:
        raise fail(f"{where}.select", str(error), hint="e.g. rr, ndcg@10, hit@3") from None
    folds = entry.get("folds")
    confirm = entry.get("confirm")
    if folds is not None and confirm is not None:
        raise fail(
            f"{where}.folds",
            "give confirm (a held-out share) or folds (cross-validation), not both",
        )
    if folds is not None and (isinstance(folds, bool) or not isinstance(folds, int) or folds < 2):
        raise fail(f"{where}.folds", f"must be a whole number >= 2, got {folds!r}")
    if folds is None:
        confirm = DEFAULT_CONFIRM if confirm is None else confirm
        if (
            isinstance(confirm, bool)
            or not isinstance(confirm, (int, float))
            or not 0 < confirm < 1
        ):
            raise fail(
                f"{where}.confirm",
                f"must be a share between 0 and 1, e.g. 0.3, got {confirm!r}",
            )
        confirm = float(confirm)
    seed = entry.get("seed", DEFAULT_SPLIT_SEED)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise fail(f"{where}.seed", f"must be a whole number >= 0, got {seed!r}")
    halving = entry.get("halving")
    if halving is not None and not isinstance(halving, bool):
        raise fail(f"{where}.halving", f"must be true or false, got {halving!r}")
    single = single_grid(values)
    if single is not None:
        raise fail(f"{where}.grid", *single)
    return SweepConfig(
        name,
        retriever,
        values,
        select=select,
        confirm=confirm,
        folds=folds,
        seed=seed,
        halving=halving,
    )


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "a table"
    return type(value).__name__


def _bad_number(value: Any) -> str | None:
    """Why a number anywhere in ``value`` (a list's, a table's) is never a setting."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r}, which is not a finite number (nan and inf are never a setting)"
    if isinstance(value, (int, float)) and abs(value) > MAX_GRID_NUMBER:
        return f"{value!r}, which is beyond {MAX_GRID_NUMBER:.0e}: a typo, never a setting"
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _bad_number(item)
            if found is not None:
                return found
    return None


def _same_key(value: Any) -> str:
    """One spelling of a value for finding a value tried twice (``1`` and ``1.0`` alike)."""
    import json

    def plain(item: Any) -> Any:
        if isinstance(item, bool) or item is None or isinstance(item, str):
            return item
        if isinstance(item, (int, float)):
            return float(item)
        if isinstance(item, Mapping):
            return {str(key): plain(each) for key, each in item.items()}
        if isinstance(item, (list, tuple)):
            return [plain(each) for each in item]
        return repr(item)

    return json.dumps(plain(value), sort_keys=True)


def grid_problem(option: str, tried: Any) -> tuple[str, str] | None:
    """(message, hint) when the values a grid tries for ``option`` are no grid: not a
    non-empty list, a value that is nan, infinite or beyond `MAX_GRID_NUMBER`, values of
    different kinds (a number beside a string), or one value tried twice."""
    example = f"e.g. {option} = [1, 2]"
    if not option.strip():
        return "an option needs a name", "e.g. grid = { k = [10, 60] }"
    if not isinstance(tried, (list, tuple)) or not tried:
        return f"must be a non-empty list of values, got {tried!r}", example
    for value in tried:
        found = _bad_number(value)
        if found is not None:
            return f"tries {found}", "give the values the option takes"
    kinds = sorted({_kind(value) for value in tried})
    if len(kinds) > 1:
        return (
            f"mixes values of different kinds ({' and '.join(kinds)}): {list(tried)!r}",
            "every value of one option is of the kind the option takes",
        )
    seen: dict[str, int] = {}
    for position, value in enumerate(tried):
        key = _same_key(value)
        if key in seen:
            return (
                f"tries {value!r} twice (values {seen[key] + 1} and {position + 1}): its "
                "configurations would be evaluated twice and compared with themselves",
                "list each value once",
            )
        seen[key] = position
    return None


def single_grid(grid: Mapping[str, Sequence[Any]]) -> tuple[str, str] | None:
    """(message, hint) for a grid of one configuration: nothing to choose between."""
    if grid and all(len(values) == 1 for values in grid.values()):
        shown = ", ".join(f"{option}={values[0]!r}" for option, values in grid.items())
        return (
            f"holds one configuration ({shown}): a sweep chooses between two or more",
            "give an option two or more values, or measure that one configuration with "
            "retrievalkit eval",
        )
    return None
