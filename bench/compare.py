"""Throughput of the same cases across two commits (or result folders), with a noise-aware verdict
and a declarative regression check (`--fail-under PCT`)."""
from __future__ import annotations

from pathlib import Path

from tabulate import tabulate

from . import results


class CompareError(ValueError):
    pass


def resolve(ref: str, root: Path) -> list[Path]:
    """A result folder as given, or every <machine>/<commit> folder whose commit starts with ref."""
    p = Path(ref)
    if p.is_dir():
        return [p]
    found = sorted(d for d in root.glob("*/*") if d.is_dir() and d.name.startswith(ref[:12]))
    if not found:
        raise CompareError(f"{ref!r} is neither a result folder nor a commit with results under {root}")
    return found


def _index(records: list[dict]) -> dict:
    """Newest ok record per (sweep, case_id)."""
    out = {}
    for r in sorted(records, key=lambda r: r.get("started_at", "")):
        if r["status"] == "ok":
            out[(r["sweep"], r["case_id"])] = r
    return out


def _hardware(records: list[dict]) -> set:
    return {(r["env"].get("gpu_model"), r["env"].get("gpu_count"), r["case"]["device"]) for r in records}


def verdict(a: dict, b: dict) -> str:
    """`faster`/`slower` only when B's repeats all lie outside A's range; otherwise noise."""
    ma, mb = a["metrics"], b["metrics"]
    if mb["images_per_s_min"] > ma["images_per_s_max"]:
        return "faster"
    if mb["images_per_s_max"] < ma["images_per_s_min"]:
        return "slower"
    return "within noise"


def compare(a_records: list[dict], b_records: list[dict], force: bool = False) -> list[dict]:
    ha, hb = _hardware(a_records), _hardware(b_records)
    if ha != hb and not force:
        raise CompareError(f"the results come from different hardware ({sorted(ha, key=str)} against "
                           f"{sorted(hb, key=str)}); compare them anyway with --force")
    ia, ib = _index(a_records), _index(b_records)
    rows = []
    for key in sorted(set(ia) & set(ib)):
        a, b = ia[key], ib[key]
        ips_a, ips_b = a["metrics"]["images_per_s"], b["metrics"]["images_per_s"]
        rows.append({"sweep": key[0], "case": key[1], "a": ips_a, "b": ips_b,
                     "change_pct": 100.0 * (ips_b - ips_a) / ips_a, "verdict": verdict(a, b)})
    return rows


def regressions(rows: list[dict], fail_under_pct: float) -> list[dict]:
    """Cases slower by more than the threshold, outside the noise of the repeats."""
    return [r for r in rows if r["verdict"] == "slower" and -r["change_pct"] > fail_under_pct]


def render(rows: list[dict], a_name: str, b_name: str) -> str:
    if not rows:
        return "no case is stored with status ok in both"
    table = [[r["sweep"], r["case"], f"{r['a']:.1f}", f"{r['b']:.1f}", f"{r['change_pct']:+.1f}%", r["verdict"]]
             for r in rows]
    return tabulate(table, headers=["sweep", "case", f"images/s {a_name}", f"images/s {b_name}", "change", "verdict"],
                    tablefmt="github", disable_numparse=True)


def load_ref(ref: str, root: Path) -> list[dict]:
    loaded = results.load(resolve(ref, root))
    results.warn_problems(loaded.problems)
    return loaded.records


def history(case_ref: str, records: list[dict]) -> list[list]:
    """That case in every stored commit, oldest first."""
    rows = []
    for r in sorted(records, key=lambda r: r.get("started_at", "")):
        if r["case_id"] == case_ref or r["case_id"].startswith(case_ref):
            m = r.get("metrics") or {}
            rows.append([r.get("started_at", ""), r["commit_folder"], r["machine"], r["sweep"], r["status"],
                         f"{m['images_per_s']:.1f}" if r["status"] == "ok" else "-",
                         f"{m['spread_pct']:.1f}%" if r["status"] == "ok" else "-"])
    return rows
