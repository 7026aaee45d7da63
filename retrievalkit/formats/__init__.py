"""Reading and writing what retrievalkit exchanges with the world: sets, corpora, runs."""
