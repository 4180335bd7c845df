"""The stored record: one JSON file per case and run, its schema version, the version of each
metric's definition, and the one function that validates it, on save and on load."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..core import identity, sharing, untrusted

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
SCHEMA1_DEFINITIONS = {"images_per_s": 1, "data_wait_pct": 1}
READ_PATH = "_path"
"""The key a record read from a file carries its path under: added as it is read, never stored."""
STATUSES = ("ok", "oom", "error", "timeout", "skipped")
REQUIRED_FIELDS = ("case", "case_id", "status", "sweep", "machine", "commit_folder")
OK_METRICS = ("images_per_s", "images_per_s_per_gpu", "spread_pct", "data_wait_pct", "step_time_median_s",
              "global_batch")


def problems(d, writing: bool = False) -> list[str]:
    """What keeps `d` from being a record: empty when it is one. `writing` also demands today's
    schema (a record is only ever written as today's code makes it)."""
    if not isinstance(d, dict):
        return ["not a JSON object"]
    schema = d.get("schema")
    if schema not in READABLE_SCHEMAS or (writing and schema != SCHEMA):
        wanted = SCHEMA if writing else " or ".join(map(str, READABLE_SCHEMAS))
        return [f"not a result of schema {wanted}"]
    missing = [k for k in REQUIRED_FIELDS + (("run_id",) if schema >= 2 else ()) if k not in d]
    if d.get("status") == "ok":
        missing += [f"metrics.{k}" for k in OK_METRICS if k not in (d.get("metrics") or {})]
    out = [f"lacks {', '.join(missing)}"] if missing else []
    if "status" in d and d["status"] not in STATUSES:
        out.append(f"status {d['status']!r} is not one of {', '.join(STATUSES)}")
    hostile = untrusted.problem(d)  # data from elsewhere: nothing in it may act on a terminal or a page
    if hostile is None:
        hostile = next((p for k in untrusted.PATH_FIELDS if k in d
                        for p in [untrusted.path_part_problem(d[k], k)] if p), None)
    return out + ([hostile] if hostile else [])


class InvalidRecord(ValueError):
    """A file or dict that is not a record; the message says why."""


@dataclass(frozen=True)
class Record:
    """One stored result, typed: where it came from, what ran, what it measured."""
    data: dict = field(repr=False)
    """The stored JSON as written (case, metrics, ranks, processes, environment, diagnosis)."""
    path: str
    machine: str
    commit: str
    """The commit folder: 12 hex digits, with `-dirty` where the tree had changes."""
    full_commit: str
    dirty: bool
    sweep: str
    run_id: str
    case_id: str
    """The case's id by today's rule (core/identity.py), computed from its stored case."""
    stored_id: str
    """The id it was stored under (its folder); older rules made other ids for the same case."""
    status: str
    started_at: str
    schema: int
    definitions: dict

    @property
    def case(self) -> dict:
        """The case's fields, those added since the record was made at their defaults."""
        return self.data["case"]

    @property
    def metrics(self) -> dict:
        return self.data.get("metrics") or {}

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def images_per_s(self) -> float | None:
        """The case's figure (global images/s); None unless it ran to the end."""
        return self.metrics.get("images_per_s") if self.ok else None

    @property
    def ci95(self) -> list[float] | None:
        return self.metrics.get("images_per_s_ci95")

    @property
    def slowed_pct(self) -> float:
        """The slowdown injected on purpose (a test of the comparison), 0 for a real run."""
        return self.data.get("injected_slowdown_pct") or 0

    @property
    def gpu_shared(self) -> list[dict]:
        """What was seen on its GPUs that was not its own (harness/gpu_guard.py); empty where it had them alone."""
        return self.data.get("gpu_shared") or []

    @property
    def host_outside_pct(self) -> float | None:
        """Share of the host's cores busy outside the run during its windows (the worst process)."""
        return self.metrics.get("host_cpu_outside_pct")

    @property
    def shared_label(self) -> str:
        """`GPU shared` (shown, never judged), `host shared` (a real loader whose host was busy outside the
        run beyond core/sharing.HOST_OUTSIDE_PCT: shown, and said) or ''."""
        if self.gpu_shared:
            return "GPU shared"
        outside = self.host_outside_pct
        if self.case.get("loader", "synthetic") != "synthetic" and outside is not None \
                and outside > sharing.HOST_OUTSIDE_PCT:
            return "host shared"
        return ""

    @property
    def current(self) -> bool:
        """Its figure, images_per_s, is today's (as stored, or re-derived from its windows): it may be
        judged. Its data wait and input stall may still be older; the diagnosis says so."""
        return self.definitions.get("images_per_s") == DEFINITIONS["images_per_s"]

    @property
    def rederived(self) -> bool:
        """Computed again under today's definition from the raw windows it keeps (store/rederive.py)."""
        return bool(self.data.get("rederived_from"))


def from_dict(d: dict, path: str = "") -> Record:
    """The typed record of a stored dict, validated; InvalidRecord says why not."""
    found = problems(d)
    if found:
        raise InvalidRecord("; ".join(found))
    d["case"] = {**identity.ID_DEFAULTS, **d["case"]}  # a record made before a knob existed ran it at its default
    env = d.get("env") or {}
    started = d.get("started_at", "")
    run_id = d.get("run_id") or "schema1-" + "".join(ch for ch in started if ch.isalnum())
    return Record(data=d, path=path or d.get(READ_PATH, ""), machine=d["machine"], commit=d["commit_folder"],
                  full_commit=env.get("commit", d["commit_folder"].removesuffix("-dirty")),
                  dirty=d["commit_folder"].endswith("-dirty"), sweep=d["sweep"], run_id=run_id,
                  case_id=identity.case_id(d["case"]), stored_id=d["case_id"], status=d["status"], started_at=started, schema=d.get("schema", 1),
                  definitions=d.get("definitions") or SCHEMA1_DEFINITIONS)


def from_file(path: Path) -> Record:
    try:
        d = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidRecord(f"unreadable ({e.__class__.__name__}: {e})") from None
    if isinstance(d, dict):
        d[READ_PATH] = str(path)
    return from_dict(d, str(path))
