"""Built-in rerankers: rescore a first stage's candidates."""
