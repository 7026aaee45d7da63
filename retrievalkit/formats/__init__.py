"""Reading and writing what users hand in: configuration tables, sets, corpora, labels."""
