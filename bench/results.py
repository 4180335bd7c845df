"""The results store: one JSON file per case, written atomically, read back tolerantly.

Layout: <root>/<machine>/<commit>/<sweep>/<case_id>.json (commit gets a `-dirty` suffix when the
tracked tree had changes, so dirty figures never pose as a commit's own).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SCHEMA = 1
STATUSES = ("ok", "oom", "error", "timeout", "skipped")
NOT_RESULTS = {"peak.json"}  # machine facts kept beside the results, not case results
# `pytest --benchmark-autosave` runs kept beside a commit's results are pytest-benchmark's own format
PYTEST_BENCHMARK_DIR = "pytest-benchmark"
DEFAULT_ROOT = Path(__file__).resolve().parent.parent / "results"


def commit_folder(env: dict) -> str:
    return env["commit"][:12] + ("-dirty" if env.get("dirty") else "")


def write_atomic(path: Path, data: dict) -> None:
    """Write JSON so a reader sees either the old file or the whole new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Store:
    def __init__(self, root: Path | str = DEFAULT_ROOT):
        self.root = Path(root)

    def sweep_dir(self, machine: str, commit: str, sweep: str) -> Path:
        return self.root / machine / commit / sweep

    def path_for(self, record: dict) -> Path:
        return self.sweep_dir(record["machine"], record["commit_folder"], record["sweep"]) / f"{record['case_id']}.json"

    def save(self, record: dict) -> Path:
        missing = [k for k in ("schema", "status", "case", "case_id", "machine", "commit_folder", "sweep")
                   if k not in record]
        if missing:
            raise ValueError(f"record lacks {', '.join(missing)}")
        if record["status"] not in STATUSES:
            raise ValueError(f"status {record['status']!r} is not one of {', '.join(STATUSES)}")
        path = self.path_for(record)
        write_atomic(path, record)
        return path

    def stored_status(self, machine: str, commit: str, sweep: str, case_id: str) -> str | None:
        """The status a stored case has (`ok`, `oom`, ...), or None when none is readable."""
        try:
            return json.loads((self.sweep_dir(machine, commit, sweep) / f"{case_id}.json").read_text()).get("status")
        except (OSError, ValueError, AttributeError):
            return None


@dataclass
class Loaded:
    records: list[dict]
    problems: list[str]


def load(paths: list[Path | str]) -> Loaded:
    """Read every result under the given files or folders; unreadable files become `problems`."""
    records, problems = [], []
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(f for f in sorted(p.rglob("*.json"))
                         if f.name not in NOT_RESULTS and PYTEST_BENCHMARK_DIR not in f.relative_to(p).parts)
        elif p.is_file():
            files.append(p)
        else:
            problems.append(f"{p}: no such file or folder")
    for f in files:
        try:
            rec = json.loads(f.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            problems.append(f"{f}: unreadable ({e.__class__.__name__}: {e})")
            continue
        if not isinstance(rec, dict) or rec.get("schema") != SCHEMA or "case" not in rec or "status" not in rec:
            problems.append(f"{f}: not a schema-{SCHEMA} result")
            continue
        rec["_path"] = str(f)
        records.append(rec)
    return Loaded(records, problems)


def warn_problems(problems: list[str]) -> None:
    for p in problems:
        print(f"warning: skipped {p}", file=sys.stderr)
