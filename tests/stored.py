"""Records as today's code stores them, made from the schema-1 fixtures for the judging tests."""
import copy
from pathlib import Path

from bench.store import query, record

FIXTURES = Path(__file__).parent / "fixtures" / "results"
RESULTS = Path(__file__).resolve().parents[1] / "results"


def committed_machines() -> list[Path]:
    """The machine folders this repository carries: a CPU machine's own (results/cpu-*, which
    .gitignore keeps out, left by a `make bench` here) is not part of what tests read as committed."""
    return sorted(p for p in RESULTS.iterdir() if p.is_dir() and not p.name.startswith("cpu-"))


def current(rec: dict, half_pct: float = 1.0, run_id: str = "20260101T000000Z-aaaa", **metrics) -> dict:
    """A copy under today's schema and metric definitions, with a 95% interval of +-half_pct."""
    r = copy.deepcopy(rec)
    r.update(schema=record.SCHEMA, definitions=dict(record.DEFINITIONS), run_id=run_id)
    m = r["metrics"]
    m.update(metrics)
    if r["status"] == "ok":
        ips = m["images_per_s"]
        m["images_per_s_ci95"] = [ips * (1 - half_pct / 100), ips * (1 + half_pct / 100)]
    return r


def ok_process(ips: float, wall_s: float, repeats: int) -> dict:
    """What launch.run_case returns for one fresh process that measured `ips` images/s, for tests that
    stand in for the launcher."""
    return {"status": "ok", "reason": "", "wall_s": wall_s, "ranks": [],
            "metrics": {"images_per_s": ips, "images_per_s_per_gpu": ips, "window_rel_se": 0.0,
                        "images_per_s_repeats": [ips] * repeats, "spread_pct": 0.0, "data_wait_pct": 0.0,
                        "step_time_median_s": 0.1, "global_batch": 2},
            "launch_marks": {"spawned": 0.0, "let_go": 0.0}}


def fixture_dicts(upgrade: bool = True) -> list[dict]:
    recs = [r.data for r in query.load([FIXTURES])[0]]
    return [current(r) for r in recs] if upgrade else recs


def fixture_records(upgrade: bool = True) -> list[query.Record]:
    return [query.wrap(r) for r in fixture_dicts(upgrade)]
