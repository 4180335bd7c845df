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
from dataclasses import dataclass, field
from pathlib import Path

from . import results
from .case import ID_OPTIONAL


@dataclass(frozen=True)
class Record:
    data: dict = field(repr=False)
    """The stored JSON as written (case, metrics, ranks, environment, diagnosis)."""
    path: str
    machine: str
    commit: str
    """The commit folder: 12 hex digits, with `-dirty` where the tree had changes."""
    full_commit: str
    dirty: bool
    sweep: str
    run_id: str
    case_id: str
    status: str
    started_at: str
    schema: int
    definitions: dict

    @property
    def older_definitions(self) -> list[str]:
        """Metrics whose stored definition differs from today's."""
        return [k for k, v in results.DEFINITIONS.items() if self.definitions.get(k) != v]

    @property
    def current(self) -> bool:
        return not self.older_definitions

    @property
    def ok(self) -> bool:
        return self.status == "ok"


SCHEMA1_DEFINITIONS = {"images_per_s": 1, "data_wait_pct": 1}


def wrap(d: dict) -> Record:
    if "case" in d:  # a record made before a knob existed ran it at its default
        d["case"] = {**ID_OPTIONAL, **d["case"]}
    env = d.get("env") or {}
    started = d.get("started_at", "")
    run_id = d.get("run_id") or "schema1-" + "".join(ch for ch in started if ch.isalnum())
    return Record(data=d, path=d.get("_path", ""), machine=d["machine"], commit=d["commit_folder"],
                  full_commit=env.get("commit", d["commit_folder"].removesuffix("-dirty")),
                  dirty=d["commit_folder"].endswith("-dirty"), sweep=d["sweep"], run_id=run_id,
                  case_id=d["case_id"], status=d["status"], started_at=started, schema=d.get("schema", 1),
                  definitions=d.get("definitions") or SCHEMA1_DEFINITIONS)


def load(paths) -> tuple[list[Record], list[str]]:
    """Every readable record under the given files or folders, and a line for each one skipped."""
    loaded = results.load(paths)
    return [wrap(d) for d in loaded.records], loaded.problems


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


def group(records: list[Record], *keys: str) -> dict:
    """Records grouped by the named attributes (e.g. "machine", "commit"), in sorted order."""
    out: dict = {}
    for r in records:
        out.setdefault(tuple(getattr(r, k) for k in keys), []).append(r)
    return dict(sorted(out.items()))


def dicts(records: list[Record]) -> list[dict]:
    return [r.data for r in records]


def runs_of(records: list[Record]) -> list[str]:
    return sorted({r.run_id for r in records})


def run_manifests(records: list[Record]) -> dict[str, dict]:
    """The manifests (noise floor, sweeps, processes) of the runs these records came from, read
    beside them: <commit folder>/runs/<run_id>.json."""
    out = {}
    for r in records:
        if r.run_id in out or r.schema < 2 or not r.path:
            continue
        path = Path(r.path).parents[2] / results.RUNS_DIR / f"{r.run_id}.json"
        try:
            out[r.run_id] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out

