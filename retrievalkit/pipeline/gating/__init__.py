"""Choosing a baseline and deciding whether a run passes against it."""
