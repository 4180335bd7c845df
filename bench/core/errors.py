"""The one error type: what the user asked for cannot be done, said in one line before any work
starts. It carries the exit code the command line returns (README: Every command)."""
from __future__ import annotations

REFUSED = 2
"""Bad input or a refusal: nothing was measured or judged."""
FAILED = 1
"""A case failed or a comparison found a regression (returned by commands, never raised)."""


class BenchError(Exception):
    """A one-line refusal; `main` prints `error: <message>` and exits with `exit_code`."""

    exit_code = REFUSED

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class CaseError(BenchError, ValueError):
    """A case that cannot run; the message names the field and what it accepts."""


class DataError(BenchError, ValueError):
    """A data folder that cannot be used; the message says what is wrong and what is expected."""


class StoreError(BenchError):
    """The results folder cannot take results, or holds nothing that was asked for."""


class CompareError(BenchError, ValueError):
    """Bad input to a comparison: an unknown reference, sides from different machines, or nothing in common."""
