"""How the reading commands (report, claims, compare, history) get their records: through the one
query, with unreadable files named on stderr and a missing folder refused."""
from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import StoreError
from ..core.untrusted import clean
from ..store import query


def load(paths) -> list[query.Record]:
    """Every readable record under the paths; a path that does not exist is a refusal."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise StoreError(f"no such results file or folder: {', '.join(missing)}; pass an existing one "
                         "(the default is results/ of this checkout)")
    records, problems = query.load(paths)
    for p in problems:
        print(f"warning: skipped {clean(p)}", file=sys.stderr)
    return records


def selected(a, records: list[query.Record]) -> list[query.Record]:
    """--machine, --commit and --run narrow what a reading command sees."""
    return query.select(records, machine=a.machine or None, commit=a.commit or None, run=a.run or None)


def shown(path: Path) -> str:
    """A written file as the user can open it from here: relative to the current folder when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
