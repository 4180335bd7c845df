"""The results store: one JSON file per case and run, written atomically, never replaced.

Layout: <root>/<machine>/<commit>/<sweep>/<case_id>/<run_id>.json (commit gets a `-dirty` suffix
when the tracked tree had changes, so dirty figures never pose as a commit's own), and one manifest
per run, <root>/<machine>/<commit>/runs/<run_id>.json, with the run's noise floor. Schema-1 files
(<sweep>/<case_id>.json, one run per case) are still read.
"""
from __future__ import annotations

import datetime
import fcntl
import json
import os
import secrets
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SCHEMA = 2
READABLE_SCHEMAS = (1, 2)
# The version of each metric's definition; a record made under another version is labelled as such
# and left out of verdicts unless asked for. Schema-1 records predate these and count as version 1.
#   images_per_s 4: median of K fresh processes, each the images of one continuous span of windows
#     over its time, with images_per_s_ci95; a real loader's interval from its own processes alone
#     (3: from the synthetic noise floor too; 2: the median of windows with pauses between them)
#   data_wait_pct 4: the host's wait on the loader's producers only, over the span's CUDA-event time
#     (3: over host-timed windows; 2: any host wait; 1: with copies)
#   input_stall_pct 2: the device stream's idle time waiting for each batch (CUDA events), over the
#     span (1: over windows with pauses between them)
DEFINITIONS = {"images_per_s": 4, "data_wait_pct": 4, "input_stall_pct": 2}
RUNS_DIR = "runs"
STATUSES = ("ok", "oom", "error", "timeout", "skipped")
NOT_RESULTS = {"peak.json"}  # machine facts kept beside the results, not case results
NOT_RESULT_DIRS = {RUNS_DIR, "comparisons"}  # run manifests; compare --json files kept beside results
# `pytest --benchmark-autosave` runs kept beside a commit's results are pytest-benchmark's own format
PYTEST_BENCHMARK_DIR = "pytest-benchmark"
DEFAULT_ROOT = Path(__file__).resolve().parent.parent / "results"


def commit_folder(env: dict) -> str:
    return env["commit"][:12] + ("-dirty" if env.get("dirty") else "")


def new_run_id() -> str:
    """A run's id: when it started (UTC, to the second) and four random hex digits, so two runs that
    start in the same second on one machine and commit still differ; machine and commit are in its path."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def write_atomic(path: Path, data: dict, replace: bool = True) -> None:
    """Write JSON so a reader sees either the old file or the whole new one, never half. With
    replace=False an existing file is never touched (FileExistsError), even by a racing writer."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True, default=str)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if the path exists: no run replaces another
    finally:
        Path(tmp).unlink(missing_ok=True)


MIN_FREE_BYTES = 64 * 2**20  # records, manifests, REPORT.md and plots of a sweep fit many times over
LOCK_FILE = ".lock"


class StoreError(RuntimeError):
    """The results folder cannot take results: said before any case runs."""


class Store:
    def __init__(self, root: Path | str = DEFAULT_ROOT):
        self.root = Path(root)
        self._lock = None

    def check_writable(self, machine: str, commit: str) -> None:
        """Refuse, before anything runs, a results folder that cannot be written or has no room."""
        folder = self.root / machine / commit
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-check-")
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise StoreError(f"results folder {folder} cannot be written ({e.strerror or e}); "
                             "fix its permissions or pass --results DIR") from None
        free = shutil.disk_usage(folder).free
        if free < MIN_FREE_BYTES:
            raise StoreError(f"results folder {folder} has {free / 2**20:.0f} MiB free, less than the "
                             f"{MIN_FREE_BYTES / 2**20:.0f} MiB a run needs; free some or pass --results DIR")

    def lock(self, machine: str, holder: str) -> None:
        """One run at a time per machine and results folder: a second one refuses (StoreError) instead
        of measuring beside the first, which would slow both and overwrite nothing but trust."""
        folder = self.root / machine
        folder.mkdir(parents=True, exist_ok=True)
        f = open(folder / LOCK_FILE, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            other = f.read().strip() or "another process"
            f.close()
            raise StoreError(f"another run is measuring on {machine} with results in {self.root} ({other}); "
                             "wait for it to finish, or use another --results folder") from None
        f.seek(0)
        f.truncate()
        f.write(holder)
        f.flush()
        self._lock = f

    def unlock(self) -> None:
        if self._lock:
            self._lock.close()  # closing releases the lock; the kernel releases it if we die
            self._lock = None

    def sweep_dir(self, machine: str, commit: str, sweep: str) -> Path:
        return self.root / machine / commit / sweep

    def path_for(self, record: dict) -> Path:
        return self.sweep_dir(record["machine"], record["commit_folder"], record["sweep"]) / record["case_id"] / \
            f"{record['run_id']}.json"

    def run_path(self, machine: str, commit: str, run_id: str) -> Path:
        return self.root / machine / commit / RUNS_DIR / f"{run_id}.json"

    def save_run(self, manifest: dict) -> Path:
        """The run's manifest (sweeps, processes, noise floor); rewritten as the run goes on."""
        path = self.run_path(manifest["machine"], manifest["commit_folder"], manifest["run_id"])
        write_atomic(path, manifest)
        return path

    def save(self, record: dict) -> Path:
        missing = [k for k in ("schema", "status", "case", "case_id", "machine", "commit_folder", "sweep", "run_id")
                   if k not in record]
        if missing:
            raise ValueError(f"record lacks {', '.join(missing)}")
        if record["status"] not in STATUSES:
            raise ValueError(f"status {record['status']!r} is not one of {', '.join(STATUSES)}")
        path = self.path_for(record)
        write_atomic(path, record, replace=False)
        return path

    def stored_status(self, machine: str, commit: str, sweep: str, case_id: str) -> str | None:
        """The status of the case's latest stored run (`ok`, `oom`, ...), or None when none is readable."""
        folder = self.sweep_dir(machine, commit, sweep)
        newest = None
        for f in [folder / f"{case_id}.json", *sorted((folder / case_id).glob("*.json"))]:
            try:
                rec = json.loads(f.read_text())
                if isinstance(rec, dict) and (newest is None or rec.get("started_at", "") >= newest.get("started_at", "")):
                    newest = rec
            except (OSError, ValueError):
                continue
        return newest.get("status") if newest else None


REQUIRED_FIELDS = ("case", "case_id", "status", "sweep", "machine", "commit_folder")
OK_METRICS = ("images_per_s", "images_per_s_per_gpu", "spread_pct", "data_wait_pct", "step_time_median_s",
              "global_batch")


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
                         if f.name not in NOT_RESULTS and PYTEST_BENCHMARK_DIR not in f.relative_to(p).parts
                         and not NOT_RESULT_DIRS & set(f.relative_to(p).parts[:-1]))
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
        if not isinstance(rec, dict) or rec.get("schema") not in READABLE_SCHEMAS:
            problems.append(f"{f}: not a result of schema {' or '.join(map(str, READABLE_SCHEMAS))}")
            continue
        missing = [k for k in REQUIRED_FIELDS if k not in rec] + \
            [f"metrics.{k}" for k in OK_METRICS if rec.get("status") == "ok" and k not in (rec.get("metrics") or {})]
        if missing:
            problems.append(f"{f}: lacks {', '.join(missing)}")
            continue
        rec["_path"] = str(f)
        records.append(rec)
    return Loaded(records, problems)


def save_fallback(record: dict, error: BaseException) -> Path:
    """Where a record goes when the results folder failed after the measurement: never lost."""
    folder = Path(tempfile.gettempdir()) / "bench-unsaved"
    path = folder / f"{record.get('machine')}-{record.get('commit_folder')}-{record.get('sweep')}-{record.get('case_id')}-{record.get('run_id')}.json"
    write_atomic(path, {**record, "unsaved_because": f"{error.__class__.__name__}: {error}"})
    return path


def warn_problems(problems: list[str]) -> None:
    for p in problems:
        print(f"warning: skipped {p}", file=sys.stderr)
