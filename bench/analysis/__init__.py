"""Judging stored records: diagnosis, compare, claims, targets, expected costs and the recommend
search. Imports store and core only."""
