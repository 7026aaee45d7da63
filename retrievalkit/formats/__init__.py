"""The edges: text files, configuration, golden sets, corpora, TREC files and labels."""
