"""Stored results: the typed record and its schema (one validation on save and on load), the
results tree with its locks, and the one query that selects records. Imports core only."""
