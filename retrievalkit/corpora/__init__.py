"""Corpus providers: read a corpus as documents and as the chunks questions are written from."""
