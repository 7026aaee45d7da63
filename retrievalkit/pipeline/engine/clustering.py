"""The cluster of each question two runs share, from their set or from what their records hold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from retrievalkit.errors import InputError
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion
from retrievalkit.stats.clusters import (
    check_cluster_by,
    cluster_codes,
    cluster_label,
    relevant_documents,
    shared_documents,
)

if TYPE_CHECKING:
    from retrievalkit.model.outcomes import Outcomes


def checked_cluster_by(field: str | None, *, where: str = "--cluster-by") -> str | None:
    """``field`` when it names a way to cluster (None stays None); an `InputError` if not."""
    if field is None:
        return None
    try:
        return check_cluster_by(field)
    except ValueError as error:
        raise InputError(str(error), field=where) from None


def check_set_clusters(questions: Sequence[GoldenQuestion], field: str, *, where: str) -> None:
    """A field no question of the set has would cluster nothing: say so instead."""
    if field == "expected":
        return
    if all(cluster_label(question, field) is None for question in questions):
        raise no_clusters_error(field, where=where)


def no_clusters_error(field: str, *, where: str = "--cluster-by") -> InputError:
    """The refusal of a field no question has (``evaluate`` and ``compare`` alike)."""
    return InputError(
        f"no question of the set has {field}, so clustering by it would change nothing",
        field=where,
        hint="add the field to the questions, or use --cluster-by expected",
    )


def partial_clusters_warning(questions: Sequence[GoldenQuestion], field: str | None) -> str | None:
    """`missing_field_warning` for clustering ``questions`` by ``field``."""
    if field is None or field == "expected":
        return None
    without = sum(cluster_label(question, field) is None for question in questions)
    return missing_field_warning(field, without, len(questions))


def paired_clusters(
    field: str,
    question_ids: Sequence[str],
    candidate: Outcomes,
    positions: npt.NDArray[np.intp],
    records: Sequence[ResultRecord],
    questions: Mapping[str, GoldenQuestion],
) -> npt.NDArray[np.intp]:
    """The cluster code of each paired question (in ``question_ids``' order)."""
    return labelled_clusters(field, question_ids, candidate, positions, records, questions)[0]


def labelled_clusters(
    field: str,
    question_ids: Sequence[str],
    candidate: Outcomes,
    positions: npt.NDArray[np.intp],
    records: Sequence[ResultRecord],
    questions: Mapping[str, GoldenQuestion],
) -> tuple[npt.NDArray[np.intp], int]:
    """The cluster code of each paired question (in ``question_ids``' order), and how
    many of them have no label for ``field`` (each is then a cluster of its own).

    A question of ``questions`` (the set) gives its own label; otherwise ``cluster`` comes
    from the records' stored clusters, ``hard_class`` and ``expected`` from the candidate's
    outcomes at ``positions``. ``meta.NAME`` needs the set.
    """
    if field == "expected":
        documents = _expected_documents(question_ids, candidate, positions, questions)
        return shared_documents(documents), 0
    labels: list[str | None] = []
    missing = [question_id for question_id in question_ids if question_id not in questions]
    if missing and field.startswith("meta."):
        raise InputError(
            f"clustering by {field} needs the questions' meta fields, which a stored run "
            "does not keep",
            field="--cluster-by",
            hint="give the set the runs were made on with --set",
        )
    hard = candidate.hard_classes if missing and field == "hard_class" else None
    stored: dict[str, str] = {}
    for record in reversed(records):
        stored.update(record.clusters)
    for question_id, position in zip(question_ids, positions.tolist(), strict=True):
        question = questions.get(question_id)
        if question is not None:
            labels.append(cluster_label(question, field))
        elif field == "cluster":
            labels.append(stored.get(question_id))
        elif hard is not None:
            labels.append(hard[position])
        else:
            labels.append(None)
    return cluster_codes(labels), sum(label is None for label in labels)


def missing_field_warning(field: str, without: int, total: int) -> str | None:
    """The warning for ``without`` of ``total`` questions lacking the field clustered by:
    each is a cluster of its own (as documented), counted as independent. None when
    none or all lack it (all: nothing is clustered, refused where a set is given)."""
    if field == "expected" or without == 0 or without == total:
        return None
    return (
        f"--cluster-by {field}: {without} of {total} questions have no {field}, so each of "
        f"those {without} is a cluster of its own (counted as independent); give them "
        f"{field}, or cluster by a field every question has"
    )


def _expected_documents(
    question_ids: Sequence[str],
    outcomes: Outcomes,
    positions: npt.NDArray[np.intp],
    questions: Mapping[str, GoldenQuestion],
) -> list[tuple[str, ...]]:
    """Each paired question's relevant documents: from its question of the set, else
    from the labels its outcome was scored against (grade 1 or more)."""
    offsets, codes, grades = outcomes.judgments
    documents = outcomes.documents
    found: list[tuple[str, ...]] = []
    for question_id, position in zip(question_ids, positions.tolist(), strict=True):
        question = questions.get(question_id)
        if question is not None:
            found.append(relevant_documents(question))
            continue
        low, high = int(offsets[position]), int(offsets[position + 1])
        found.append(
            tuple(
                sorted(
                    {
                        documents[code]
                        for code, grade in zip(
                            codes[low:high].tolist(), grades[low:high].tolist(), strict=True
                        )
                        if grade >= 1
                    }
                )
            )
        )
    return found
