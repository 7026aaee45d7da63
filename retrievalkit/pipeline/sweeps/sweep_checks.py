"""What a sweep checks before it asks its first question, each refusal naming the key.

A sweep runs for minutes or hours, so everything that can be found wrong is found
first, as an `InputError` (exit code 2) naming the ``[sweeps.NAME]`` key and, from a
configuration file, its line:

- the table itself, when it was built in code as a `SweepConfig` rather than read from
  a file (`retrievalkit.formats.sweep_table` checks what it reads): each option's values
  (`grid_problem`), a grid of one configuration, ``confirm``, ``folds``, ``seed``;
- every option of the grid against the retriever it sets: an option its factory does not
  take, and a value of another kind than the factory declares (a string for ``k1:
  float``), before anything is built;
- the shares: a tuning or held-out share with fewer questions (clusters, when the set
  has them) than `minimum_share` is refused with the numbers: below it the paired test's
  smallest p-value, ``2 / 2**n``, stays above alpha, so no winner could ever be confirmed;
- every configuration is started (its retriever built) before any is asked; one that
  cannot start, while the configured retriever can, is refused naming the configuration
  and the option that broke it (`configuration_error`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrievalkit.errors import InputError, RetrievalkitError
from retrievalkit.formats.sweep_table import grid_problem, single_grid

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config
    from retrievalkit.formats.sweep_table import SweepConfig
    from retrievalkit.model.values import GoldenQuestion


def where(spec: SweepConfig, config: Config, key: str | None = None) -> dict[str, Any]:
    """``source``, ``line`` and ``field`` of ``sweeps.NAME[.KEY]``, as an `InputError` takes
    them (the line when the configuration came from a file)."""
    field = f"sweeps.{spec.name}" + (f".{key}" if key else "")
    if config.source is None or spec.name not in config.sweeps:
        return {"field": field}
    from retrievalkit.plugins.factories import config_place

    table, _, option = field.rpartition(".") if key else (field, "", "")
    return config_place(str(config.source), table, option or None)


def check_spec(spec: SweepConfig, config: Config) -> None:
    """What `retrievalkit.formats.sweep_table` checks of a table read from a file, for a
    `SweepConfig` built in code."""
    for option, values in spec.grid.items():
        problem = grid_problem(option, values)
        if problem is not None:
            message, hint = problem
            raise InputError(message, hint=hint, **where(spec, config, f"grid.{option}"))
    single = single_grid(spec.grid)
    if not spec.grid or single is not None:
        message, hint = single or ("needs a table of option = [values to try]", "")
        raise InputError(message, hint=hint or None, **where(spec, config, "grid"))
    if spec.folds is not None:
        if isinstance(spec.folds, bool) or not isinstance(spec.folds, int) or spec.folds < 2:
            raise InputError(
                f"must be a whole number >= 2, got {spec.folds!r}", **where(spec, config, "folds")
            )
    elif (
        isinstance(spec.confirm, bool)
        or not isinstance(spec.confirm, (int, float))
        or not 0 < spec.confirm < 1
    ):
        raise InputError(
            f"must be a share between 0 and 1, e.g. 0.3, got {spec.confirm!r}",
            **where(spec, config, "confirm"),
        )
    if isinstance(spec.seed, bool) or not isinstance(spec.seed, int) or spec.seed < 0:
        raise InputError(
            f"must be a whole number >= 0, got {spec.seed!r}", **where(spec, config, "seed")
        )


#: What a factory's annotation (as a string) accepts, for the simple kinds a grid tries.
_ACCEPTS: Mapping[str, Any] = {
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "None": lambda v: v is None,
}


def _accepts(annotation: Any, value: Any) -> bool | None:
    """Whether ``value`` is of the kind ``annotation`` declares; None when it declares a
    kind this check does not read (a sequence, a mapping, a class)."""
    if annotation is inspect.Parameter.empty:
        return None
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    kinds = [part.strip() for part in str(text).split("|")]
    if not kinds or any(kind not in _ACCEPTS for kind in kinds):
        return None
    return any(_ACCEPTS[kind](value) for kind in kinds)


_WORDS = {"float": "a number", "int": "a whole number", "str": "a string", "bool": "true or false"}


def _declared(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    kinds = [kind.strip() for kind in str(text).split("|")]
    return " or ".join(_WORDS[kind] for kind in kinds if kind in _WORDS)


def targets(spec: SweepConfig, config: Config) -> dict[str, tuple[str, list[str]]]:
    """Each grid option's (retriever it sets, path of keys in that retriever's options), as
    `retrievalkit.pipeline.sweeps.sweep.apply_options` sets it."""
    from retrievalkit.pipeline.engine.shared_answers import referenced

    reached = referenced(spec.retriever, config)
    found = {}
    for key in spec.grid:
        head, dot, rest = key.partition(".")
        if dot and head in reached and head in config.retrievers:
            found[key] = (head, rest.split("."))
        else:
            found[key] = (spec.retriever, key.split("."))
    return found


def check_options(spec: SweepConfig, config: Config) -> None:
    """Every option of the grid is one its retriever's factory takes, and every value of
    the kind the factory declares for it (when it declares a plain kind)."""
    from retrievalkit.errors import PluginError
    from retrievalkit.plugins import registry as plugins
    from retrievalkit.plugins.factories import HANDED

    for option, (target, path) in targets(spec, config).items():
        configured = config.retrievers.get(target)
        plugin_name = configured.plugin if configured is not None else target
        try:
            factory = plugins.load(plugins.find_one(plugins.RETRIEVERS, plugin_name))
            parameters = inspect.signature(factory).parameters
        except (PluginError, TypeError, ValueError):
            continue  # said when the configured retriever is built
        if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            continue
        accepted = sorted(
            name
            for name, p in parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and not name.startswith("_")
            and name not in HANDED
        )
        if len(path) > 1:
            continue  # a key of a table option (or a dotted name apply_options refuses)
        if path[0] not in accepted:
            import difflib

            close = difflib.get_close_matches(path[0], accepted, n=1, cutoff=0.6)
            raise InputError(
                f"'{path[0]}' is no option of retriever '{target}' (plugin '{plugin_name}')",
                hint=(f"did you mean '{close[0]}'? " if close else "")
                + f"it takes: {', '.join(accepted)}",
                **where(spec, config, f"grid.{option}"),
            )
        annotation = parameters[path[0]].annotation
        for value in spec.grid[option]:
            if _accepts(annotation, value) is False:
                raise InputError(
                    f"tries {value!r} for '{path[0]}' of retriever '{target}' (plugin "
                    f"'{plugin_name}'), which takes {_declared(annotation)}",
                    hint="give values of the kind the option takes",
                    **where(spec, config, f"grid.{option}"),
                )


def minimum_share(confidence: float) -> int:
    """The fewest questions (or clusters) a tuning or held-out share may have: the least
    n whose smallest two-sided sign-flip p-value, ``2 / 2**n``, reaches alpha = 1 -
    ``confidence`` (6 at 0.95, 8 at 0.99). Fewer, and no difference could ever be found
    significant: the confirmation would be ``unresolvable`` whatever the answers."""
    alpha = 1.0 - confidence
    return max(2, math.ceil(math.log2(2.0 / alpha) - 1e-12))


def check_split(
    spec: SweepConfig, config: Config, questions: Sequence[GoldenQuestion], confidence: float
) -> None:
    """The shares of ``spec``'s split of ``questions``, checked (`check_shares`): tuning and
    held out; with folds, all questions and, for each fold, the questions its choice is
    made on."""
    from retrievalkit.pipeline.sweeps import sweep_split

    units = sweep_split.units(questions)
    if spec.folds is not None:
        if spec.folds > len(units):
            return  # refused by the cross-validation itself, with its own words
        fold_of = sweep_split.folds(questions, spec.folds, spec.seed)
        sizes = [0] * spec.folds
        for unit in units:
            sizes[fold_of[unit[0]]] += 1
        shares = [("in all", len(units))] + [
            (f"to choose fold {number + 1} by", len(units) - size)
            for number, size in enumerate(sizes)
        ]
    else:
        assert spec.confirm is not None
        _, held = sweep_split.split(questions, spec.confirm, spec.seed)
        chosen = set(held)
        out = sum(unit[0] in chosen for unit in units)
        shares = [("to tune on", len(units) - out), ("held out", out)]
    check_shares(spec, config, questions, shares, confidence)


def check_shares(
    spec: SweepConfig,
    config: Config,
    questions: Sequence[GoldenQuestion],
    shares: Sequence[tuple[str, int]],
    confidence: float,
) -> None:
    """Each (name, units) share has at least `minimum_share` units, else an `InputError`
    with every share's count and the minimum."""
    from retrievalkit.pipeline.sweeps import sweep_split

    least = minimum_share(confidence)
    if all(count >= least for _, count in shares):
        return
    unit = "clusters" if sweep_split.clustered(questions) else "questions"
    counted = ", ".join(f"{count} {unit} {name}" for name, count in shares)
    how = (
        f"{spec.folds} folds of {len(questions)} questions"
        if spec.folds is not None
        else f"holding out {spec.confirm:.0%} of {len(questions)} questions"
    )
    raise InputError(
        f"sweep '{spec.name}': {how} leaves {counted}; each share needs at least {least} "
        f"{unit}: with fewer, the paired test's smallest p-value (2 / 2^n) stays above "
        f"{1.0 - confidence:.2g}, so nothing could be confirmed",
        hint="use a larger set, a confirm share nearer 0.5, or fewer folds",
        **where(spec, config, "folds" if spec.folds is not None else "confirm"),
    )


def configuration_error(
    spec: SweepConfig, config: Config, options: Mapping[str, Any], error: RetrievalkitError
) -> InputError:
    """A configuration of the grid that could not start, while the configured retriever
    can: its grid values are the cause. Names the sweep, the configuration and, when the
    error names the option, that option's key of the grid (exit code 2)."""
    label = ", ".join(f"{key}={value!r}" for key, value in options.items())
    field = getattr(error, "field", None)
    option = None
    for key, (target, path) in targets(spec, config).items():
        if field in (f"retrievers.{target}.{'.'.join(path)}", path[0], ".".join(path)):
            option = key
    detail = error.detail if isinstance(error, InputError) else str(error)
    if isinstance(error, InputError) and error.field and option is None:
        detail = f"{error.field}: {detail}"
    return InputError(
        f"sweep '{spec.name}', configuration {label}: cannot start: {detail}",
        hint="the configured retriever starts, so these grid values are the cause: change "
        "or remove them",
        **where(spec, config, f"grid.{option}" if option else "grid"),
    )
