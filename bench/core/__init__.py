"""The vocabulary every layer shares: the Case and its identity, the named sweeps, statistics,
verdicts and the one error type. Imports nothing else of bench."""
