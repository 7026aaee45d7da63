"""Running an evaluation: ask the retriever, score each question, build the record."""
