"""Records as today's code stores them, made from the schema-1 fixtures for the judging tests."""
import copy
from pathlib import Path

from bench.store import query, record

FIXTURES = Path(__file__).parent / "fixtures" / "results"


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


def fixture_dicts(upgrade: bool = True) -> list[dict]:
    recs = [r.data for r in query.load([FIXTURES])[0]]
    return [current(r) for r in recs] if upgrade else recs


def fixture_records(upgrade: bool = True) -> list[query.Record]:
    return [query.wrap(r) for r in fixture_dicts(upgrade)]
