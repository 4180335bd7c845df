"""The results store: one JSON file per case and run, written atomically, never replaced.

Layout: <root>/<machine>/<commit>/<sweep>/<case_id>/<run_id>.json (commit gets a `-dirty` suffix
when the tracked tree had changes, so dirty figures never pose as a commit's own), and one manifest
per run, <root>/<machine>/<commit>/runs/<run_id>.json, with the run's noise floor. Schema-1 files
(<sweep>/<case_id>.json, one run per case) are still read.
"""
from __future__ import annotations

import datetime
import fcntl
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from ..core.errors import StoreError
from ..core.files import write_json_atomic
from . import record as schema

RUNS_DIR = "runs"
NOT_RESULTS = {"peak.json"}  # machine facts kept beside the results, not case results
NOT_RESULT_DIRS = {RUNS_DIR, "comparisons"}  # run manifests; compare --json files kept beside results
# `pytest --benchmark-autosave` runs kept beside a commit's results are pytest-benchmark's own format
PYTEST_BENCHMARK_DIR = "pytest-benchmark"
DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "results"
GENERATED_ROOT = DEFAULT_ROOT.parent / "build"
"""Where commands put files nobody named (the whole report, history plots) when they read this
checkout's results: build/, which .gitignore keeps out, so the checkout stays clean."""
MACHINE_PAGE = "README.md"
"""Each machine folder's generated page: what its stored results answer, with links."""


def generated_folder(results_root: Path | str, name: str) -> Path | None:
    """build/<name> for this checkout's own results; None for a results tree elsewhere (its commands
    write beside it, as they always have)."""
    return GENERATED_ROOT / name if Path(results_root).resolve() == DEFAULT_ROOT else None


def commit_folder(env: dict) -> str:
    return env["commit"][:12] + ("-dirty" if env.get("dirty") else "")


def new_run_id() -> str:
    """A run's id: when it started (UTC, to the second) and four random hex digits, so two runs that
    start in the same second on one machine and commit still differ; machine and commit are in its path."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


MIN_FREE_BYTES = 64 * 2**20  # records, manifests, REPORT.md and plots of a sweep fit many times over
LOCK_FILE = ".lock"


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
        write_json_atomic(path, manifest)
        return path

    def save(self, record: dict) -> Path:
        """A new record file; never replaces one (a run never overwrites another)."""
        found = schema.problems(record, writing=True)
        if found:
            raise schema.InvalidRecord("; ".join(found))
        path = self.path_for(record)
        write_json_atomic(path, record, replace=False)
        return path


def result_files(paths: list[Path | str]) -> tuple[list[Path], list[str]]:
    """The record files under the given files or folders (not manifests, peaks, comparisons or
    pytest-benchmark's own files), and a line for each path that does not exist."""
    files: list[Path] = []
    missing = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(f for f in sorted(p.rglob("*.json"))
                         if f.name not in NOT_RESULTS and PYTEST_BENCHMARK_DIR not in f.relative_to(p).parts
                         and not NOT_RESULT_DIRS & set(f.relative_to(p).parts[:-1]))
        elif p.is_file():
            files.append(p)
        else:
            missing.append(f"{p}: no such file or folder")
    return files, missing


def save_fallback(record: dict, error: BaseException) -> Path:
    """Where a record goes when the results folder failed after the measurement: never lost."""
    folder = Path(tempfile.gettempdir()) / "bench-unsaved"
    path = folder / f"{record.get('machine')}-{record.get('commit_folder')}-{record.get('sweep')}-{record.get('case_id')}-{record.get('run_id')}.json"
    write_json_atomic(path, {**record, "unsaved_because": f"{error.__class__.__name__}: {error}"})
    return path
