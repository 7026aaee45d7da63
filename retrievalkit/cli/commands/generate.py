"""``retrievalkit generate``: write a golden set of synthetic questions from a corpus."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, load_config, positive
from retrievalkit.errors import EXIT_OK, EvaluationError, InputError, PluginError

Progress = Callable[[int], None]

NAME, HELP = SUMMARIES["generate"]

#: Failures listed one by one on stderr; the rest are counted.
SHOWN_FAILURES = 20


@contextmanager
def progress_bar(args: argparse.Namespace, total: int, label: str) -> Iterator[Progress]:
    """A progress callback: a bar on a terminal's stderr, nothing otherwise."""
    import sys

    from retrievalkit.cli.commands.options import console
    from retrievalkit.render.terminal import watched

    status = console(args, stderr=True)
    if not watched(sys.stderr) or total == 0:
        yield lambda _: None
        return
    from rich.progress import Progress as Bar

    with Bar(console=status, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.advance(task, done)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus",
        required=True,
        metavar="PATH",
        help="a BEIR corpus.jsonl (or its folder), or a folder of .txt/.md files",
    )
    parser.add_argument(
        "--corpus-type",
        metavar="TYPE",
        help="corpus plugin: beir or folder, or one a plugin adds (default: beir for a .jsonl "
        "file or a folder holding corpus.jsonl, else folder)",
    )
    parser.add_argument(
        "--chunk-size", type=positive, metavar="WORDS", help="folder corpus: words per chunk (200)"
    )
    parser.add_argument(
        "--chunk-overlap",
        type=int,
        metavar="WORDS",
        help="folder corpus: words shared by neighbouring chunks (40)",
    )
    parser.add_argument(
        "--doc-id-separator",
        metavar="SEP",
        help="beir corpus of chunks: the separator before the chunk number in its ids (e.g. "
        "'#' for doc-7#3), so questions expect the document, as your retriever returns it",
    )
    parser.add_argument(
        "--generator",
        required=True,
        metavar="NAME",
        help="a [generators.NAME] of the config, or a generator plugin (offline, "
        "openai-compatible)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a generator option, added to or replacing the config's (repeatable), "
        "e.g. --option model=llama3",
    )
    parser.add_argument(
        "--form",
        choices=("MATCH", "GAP"),
        type=str.upper,
        help="the form to aim at (default: the generator's first: GAP for openai-compatible, "
        "MATCH for offline)",
    )
    parser.add_argument(
        "--limit", type=positive, metavar="N", help="a seeded random sample of N chunks"
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="S", help="seed of the --limit sample (default 0)"
    )
    parser.add_argument(
        "--output", required=True, metavar="FILE", help="the golden set to write (.jsonl)"
    )
    parser.add_argument(
        "--cache",
        metavar="DIR",
        help="generation cache (default .retrievalkit/generation-cache); keyed by chunk "
        "content, generator, model, prompt version and form",
    )
    parser.add_argument(
        "--regenerate",
        action="store_true",
        help="ask the generator again even where the cache has a question (and update it)",
    )
    add_common(parser, store=False, fmt=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.corpora.providers import open_corpus
    from retrievalkit.formats.golden_sets import load_jsonl, write_jsonl
    from retrievalkit.model.values import QuestionForm
    from retrievalkit.pipeline.authoring.generation import (
        DEFAULT_CACHE_DIR,
        NEAR_QUOTE,
        NEAR_QUOTE_WARNING_SHARE,
        GenerationCache,
        QuestionGenerator,
        generate_questions,
    )
    from retrievalkit.plugins import registry as plugins
    from retrievalkit.plugins.factories import create_instance, parse_options

    output = Path(args.output)
    if output.suffix != ".jsonl":
        raise InputError(
            "the output must be a .jsonl file", field="--output", hint="e.g. golden.jsonl"
        )
    config = load_config(args)
    corpus_options: dict[str, int | str] = {}
    if args.chunk_size is not None:
        corpus_options["chunk_size"] = args.chunk_size
    if args.chunk_overlap is not None:
        corpus_options["chunk_overlap"] = args.chunk_overlap
    if args.doc_id_separator is not None:
        corpus_options["doc_id_separator"] = args.doc_id_separator
    corpus_path = Path(args.corpus)
    from retrievalkit.cli.commands.collisions import check_run_outputs, read_files

    check_run_outputs(
        [("--output", output)],
        None,
        read_files(
            config,
            ("--corpus", corpus_path),
            ("--cache", Path(args.cache) if args.cache else None),
        ),
    )
    corpus = open_corpus(corpus_path, args.corpus_type, corpus_options)
    chunks = list(corpus.chunks())
    if not chunks:
        raise InputError(
            "the corpus holds no text to write questions from", source=str(corpus_path)
        )

    instance, generator = create_instance(
        plugins.GENERATORS,
        args.generator,
        config.generators,
        parse_options(args.option),
        section="generators",
    )
    if not isinstance(generator, QuestionGenerator):
        raise PluginError(
            f"generator plugin '{instance.plugin}' returned {type(generator).__name__}, which "
            "lacks identifier, model, prompt_version, forms or generate(chunk, form)"
        )
    form = QuestionForm(args.form) if args.form else generator.forms[0]
    if form not in generator.forms:
        raise InputError(
            f"generator '{instance.name}' cannot write {form.value} questions",
            field="--form",
            hint="it writes " + ", ".join(item.value for item in generator.forms),
        )

    sampled = chunks
    if args.limit is not None and args.limit < len(chunks):
        import random

        picked = sorted(random.Random(args.seed).sample(range(len(chunks)), args.limit))
        sampled = [chunks[index] for index in picked]
    print(
        f"generate: {len(chunks)} chunks in {corpus_path}; asking about {len(sampled)}"
        + (f" (seeded sample, seed {args.seed})" if sampled is not chunks else "")
        + f" with {instance.name} ({generator.model}, prompt {generator.prompt_version}), "
        f"form {form.value}"
    )
    cache = GenerationCache(Path(args.cache) if args.cache else DEFAULT_CACHE_DIR)
    with progress_bar(args, len(sampled), f"generating with {instance.name}") as advance:
        result = generate_questions(
            sampled, generator, form, cache=cache, regenerate=args.regenerate, progress=advance
        )

    for failure in result.failures[:SHOWN_FAILURES]:
        print(f"generate: failed: chunk {failure.chunk_id}: {failure.error}", file=sys.stderr)
    if len(result.failures) > SHOWN_FAILURES:
        print(
            f"generate: ... and {len(result.failures) - SHOWN_FAILURES} more failures",
            file=sys.stderr,
        )
    counts = (
        f"{len(result.questions)} generated, {len(result.failures)} failed "
        f"({result.replayed} replayed from the cache, {result.calls} generator calls)"
    )
    if not result.questions:
        example = result.failures[0].error if result.failures else "no chunks"
        raise EvaluationError(
            f"no question could be generated: {counts}; e.g. {example}. Nothing was written"
        )
    print(f"generate: {counts}")
    write_jsonl(result.questions, output)
    written = load_jsonl(output)  # the file must be a set that eval and validate accept
    print(
        f"generate: wrote {len(written.questions)} questions to {output} "
        f"(set {written.name}, content hash {written.content_hash[:12]})"
    )
    near = result.near_quotes
    if near > NEAR_QUOTE_WARNING_SHARE * len(result.questions):
        print(
            f"generate: warning: {near} of {len(result.questions)} questions "
            f"({near / len(result.questions):.0%}) are near-quotes (lexical overlap >= "
            f"{NEAR_QUOTE:.2f} with their chunk): they flatter keyword search. Aim at GAP "
            "questions, and compare retrievers with eval --slice overlap_band",
            file=sys.stderr,
        )
    return EXIT_OK
