"""``retrievalkit tfidf-explain``: why the TF-IDF retriever ranks documents as it does.

A plugin command is a module (or any object) with ``HELP``, ``configure(parser)`` and
``run(args) -> int``, registered in the ``retrievalkit.commands`` entry-point group.
retrievalkit imports it only when the command is run.
"""

from __future__ import annotations

import argparse

from retrievalkit.plugin_api import EXIT_OK

HELP = "Show the question's TF-IDF terms and the best-scored documents (retrievalkit-example)."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("question", help="the question to explain")
    parser.add_argument(
        "--corpus", metavar="FILE", help="a BEIR corpus.jsonl (default: the bundled bike guide)"
    )
    parser.add_argument(
        "--limit", type=int, default=5, metavar="N", help="documents to show (default 5)"
    )


def run(args: argparse.Namespace) -> int:
    from retrievalkit_example.tfidf import create_tfidf, tokenize

    retriever = create_tfidf(args.corpus)
    known = retriever.known_terms(args.question)
    unknown = sorted(set(tokenize(args.question)) - set(known))
    print("terms: " + (", ".join(dict.fromkeys(known)) or "(none in the corpus)"))
    if unknown:
        print("not in the corpus: " + ", ".join(unknown))
    for rank, (doc_id, score) in enumerate(retriever.scored(args.question, args.limit), 1):
        print(f"{rank:>3}  {score:.4f}  {doc_id}")
    return EXIT_OK
