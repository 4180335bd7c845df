"""The one place that selects stored results: typed records, chosen by machine, exact commit, sweep,
run and metric-definition version. Report, claims, compare, history, targets, plots and the pytest
front end all read through here, so they agree on which figures they judge.

Rules: a commit reference matches a commit's id or its prefix, and `-dirty` is a different tree
(asked for by its own name); where a case has several runs, the latest is used unless a run is
named; records made under an older metric definition are labelled and left out of verdicts unless
`include_old` asks for them.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..core import untrusted
from . import tree
from .record import InvalidRecord, Record, from_dict, from_file
from .rederive import mark_not_training, rederive

__all__ = ["Record", "load", "wrap", "select", "latest", "group", "runs_of", "run_manifests", "latest_status",
           "newest_commit", "newest_first", "by_name_and_gpus", "fastest", "article_setting", "article_cells", "commit_matches"]


def wrap(d: dict) -> Record:
    """A record dict (stored, or just assembled by a run) as a typed, validated Record."""
    return from_dict(d)


def load(paths) -> tuple[list[Record], list[str]]:
    """Every valid record under the given files or folders, and a line for each file skipped. A record
    made under an older definition of images_per_s is re-derived where its raw windows allow
    (store/rederive.py) and says so (Record.rederived); one that measured no training is read as failed."""
    files, problems = tree.result_files(paths)
    records, manifests = [], {}
    for f in files:
        if untrusted.CONTROL.search(str(f)):  # its name alone would act on a terminal
            problems.append(f"{untrusted.clean(str(f))}: its name holds control characters")
            continue
        try:
            r = from_file(f)
        except InvalidRecord as e:
            problems.append(f"{f}: {e}")
            continue
        if not r.current and r.schema >= 2:
            manifest = _manifest(r, manifests)
            if rederive(r.data, manifest.get("noise_floor")):
                r = from_dict(r.data, r.path)
        if mark_not_training(r.data):
            r = from_dict(r.data, r.path)
        records.append(r)
    for r in records:  # a run's manifest that says what data may not is skipped, and said, like a record
        _manifest(r, manifests)
    problems += [f"{untrusted.clean(str(path))}: {why}" for path, (_, why) in sorted(manifests.items()) if why]
    return records, problems


def manifest_path(r: Record) -> Path | None:
    """Where the manifest of the record's run lies: <commit folder>/runs/<run_id>.json."""
    parents = Path(r.path).parents
    return parents[2] / tree.RUNS_DIR / f"{r.run_id}.json" if r.schema >= 2 and r.path and len(parents) > 2 else None


def _manifest(r: Record, cache: dict) -> dict:
    """The manifest of the record's run ({} where none is readable); `cache` keeps each path's manifest
    and why it was refused."""
    path = manifest_path(r)
    if path is None:
        return {}
    if path not in cache:
        cache[path] = parse_manifest(path)
    return cache[path][0] or {}


_parsed: dict[Path, tuple[tuple, tuple[dict | None, str]]] = {}
"""Each manifest read in this process, under the size and time of change it was read at: one report asks for
the same manifests hundreds of times, and each read checked every string of them again. Shared, never changed."""


def parse_manifest(path: Path) -> tuple[dict | None, str]:
    """(a run's manifest, '') or (None, why not): '' too for a missing file, which is no problem of the data."""
    try:
        st = path.stat()
    except OSError:
        return None, ""
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    kept = _parsed.get(path)
    if kept is None or kept[0] != stamp:
        kept = _parsed[path] = (stamp, _parse_manifest(path))
    return kept[1]


def _parse_manifest(path: Path) -> tuple[dict | None, str]:
    try:
        m = json.loads(path.read_text())
    except OSError:
        return None, ""
    except ValueError:
        return None, "a run manifest that is not JSON"
    if not isinstance(m, dict):
        return None, "a run manifest that is not a JSON object"
    problem = untrusted.problem(m)
    return (None, problem) if problem else (m, "")


def read_manifest(path: Path) -> dict | None:
    """A run's manifest, or None where it is unreadable or says what data may not (core/untrusted.py)."""
    return parse_manifest(path)[0]


def commit_matches(rec: Record, ref: str) -> bool:
    """`ref` names this exact tree: a prefix of its commit (4 hex digits or more), `-dirty` only for a dirty tree."""
    dirty = ref.endswith("-dirty")
    sha = ref.removesuffix("-dirty")
    return len(sha) >= 4 and rec.dirty == dirty and (rec.full_commit.startswith(sha) or rec.commit.startswith(sha))


def select(records: list[Record], machine: str | None = None, commit: str | None = None, sweep: str | None = None,
           run: str | None = None, include_old: bool = True, status: str | None = None) -> list[Record]:
    return [r for r in records
            if (machine is None or r.machine == machine) and (commit is None or commit_matches(r, commit))
            and (sweep is None or r.sweep == sweep) and (run is None or r.run_id.startswith(run))
            and (include_old or r.current) and (status is None or r.status == status)]


def latest(records: list[Record]) -> list[Record]:
    """The latest run of each case (per machine, commit, sweep and case id): the default rule. A run
    slowed on purpose (a test of the comparison) stands for a case only where no other run does."""
    out: dict = {}
    for r in sorted(records, key=lambda r: (not r.data.get("injected_slowdown_pct"), r.started_at, r.run_id)):
        out[(r.machine, r.commit, r.sweep, r.case_id)] = r
    return list(out.values())


def group(records: list[Record], *keys: str | Callable[[Record], str]) -> dict:
    """Records grouped by the named attributes (e.g. "machine", "commit"), or by what a function of the
    record returns, in sorted order."""
    out: dict = {}
    for r in records:
        out.setdefault(tuple(k(r) if callable(k) else getattr(r, k) for k in keys), []).append(r)
    return dict(sorted(out.items()))


def newest_first(records: list[Record], key: str | Callable[[Record], str]) -> list[tuple[str, list[Record]]]:
    """The records grouped by one attribute ("machine", "commit") or function of the record, the group
    measured most recently first: by when they ran, never by name or hash."""
    groups = group(records, key)
    order = sorted(groups, key=lambda k: max((r.started_at, r.run_id) for r in groups[k]), reverse=True)
    return [(k[0], groups[k]) for k in order]


def interrupted_runs(records: list[Record], machine: str, commit: str, sweep: str, exclude: str = "") -> list[str]:
    """The latest run of this machine and commit that was interrupted during this sweep (`--resume`
    continues it), by its manifest, then the runs it itself continued (a resumed run interrupted again
    keeps what the first stored); [] where there is none."""
    manifests = run_manifests(select(records, machine=machine, commit=commit)).values()
    finished = {r for m in manifests if m.get("finished_at") and not m.get("interrupted") for r in m.get("resumed_runs", [])}
    runs = [m for m in manifests if m.get("interrupted") and sweep in m.get("sweeps", [])
            and m.get("run_id") not in (exclude, *finished)]  # a run a later one finished is done
    if not runs:
        return []
    latest_run = max(runs, key=lambda m: (m.get("started_at", ""), m["run_id"]))
    return [latest_run["run_id"], *latest_run.get("resumed_runs", [])]


def latest_status(records: list[Record], machine: str, commit: str, sweep: str, case_id: str) -> str | None:
    """The status of a case's latest stored run in one sweep of one commit (`--resume`), or None."""
    chosen = latest(select(records, machine=machine, sweep=sweep))
    return next((r.status for r in chosen if r.commit == commit and r.case_id == case_id), None)


def newest_commit(records: list[Record]) -> str:
    """The commit folder of the most recently started record."""
    return max(records, key=lambda r: (r.started_at, r.run_id)).commit


def by_name_and_gpus(records: list[Record], name: str) -> dict[int, Record]:
    """The newest ok record of a recipe per GPU count."""
    out = {}
    for r in sorted(records, key=lambda r: (r.started_at, r.run_id)):
        if r.ok and r.case["name"] == name:
            out[r.case["gpus"]] = r
    return out


def fastest(records: list[Record], name: str, gpus: int) -> Record | None:
    """The highest-throughput ok record of a recipe at a GPU count."""
    ok = [r for r in records if r.ok and r.case["name"] == name and r.case["gpus"] == gpus]
    return max(ok, key=lambda r: r.images_per_s, default=None)


def runs_of(records: list[Record]) -> list[str]:
    return sorted({r.run_id for r in records})


def run_manifests(records: list[Record]) -> dict[str, dict]:
    """The manifests (noise floor, sweeps, processes) of the runs these records came from, read
    beside them: <commit folder>/runs/<run_id>.json."""
    out = {}
    for r in records:
        path = manifest_path(r)
        if r.run_id in out or path is None:
            continue
        m = read_manifest(path)
        if m is not None:
            out[r.run_id] = m
    return out



ARTICLE_MODEL = "resnet50"


def article_setting(records: list[Record], names: tuple[str, ...]) -> tuple[str, int, int] | None:
    """(model, image size, per-GPU batch) of the article's table among these recipes' records: a table
    never mixes them. The article's ResNet-50 first, then the setting most records ran at (a run at
    another batch, an OOM probe say, or a search's small model is not a cell of it)."""
    settings = [(r.case["model"], r.case["image_size"], r.case["batch_size"]) for r in records if r.case["name"] in names]
    if not settings:
        return None
    counts = {s: settings.count(s) for s in settings}
    return max(counts, key=lambda s: (s[0] == ARTICLE_MODEL, counts[s], s[1], s[2]))


def article_cells(records: list[Record], names: tuple[str, ...]) -> tuple[list[Record], tuple | None]:
    """These recipes' records at the article table's one setting (article_setting), and the setting."""
    setting = article_setting(records, names)
    return [r for r in records if r.case["name"] in names
            and (r.case["model"], r.case["image_size"], r.case["batch_size"]) == setting], setting
