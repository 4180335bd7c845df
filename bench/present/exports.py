"""The report's tables as CSV files: the seed table, and every case with its full id."""
from __future__ import annotations

import csv
from pathlib import Path

from ..store.record import Record
from .article import EXTRA_HEADINGS, HEADINGS, seed_rows
from .cases import FULL_COLUMNS, _order, full_rows


def _write(path: Path, headers: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(headers)
        writer.writerows(rows)


def write_csv(records: list[Record], path: Path, lang: str = "en") -> tuple[Path, Path]:
    """The seed table at `path`, every case at `<path>.cases.csv` (with its full case id)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(path, HEADINGS[lang] + EXTRA_HEADINGS, seed_rows(records))
    cases = path.with_suffix(".cases.csv")
    ordered = _order(records)
    _write(cases, FULL_COLUMNS[:2] + ["case id"] + FULL_COLUMNS[2:],
           [row[:2] + [r.case_id] + row[2:] for r, row in zip(ordered, full_rows(ordered))])
    return path, cases
