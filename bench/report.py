"""Tables from stored results only: the seeds' table (baseline against optimized per GPU count)
and a full table of every case with its configuration."""
from __future__ import annotations

import statistics
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from . import query, results, stats

HEADINGS = {
    "en": ["GPUs", "Batch size (global)", "Baseline throughput (samples/s)",
           "Optimized throughput (samples/s)", "Improvement"],
    # the article's own headings, for side-by-side reading with it
    "zh": ["GPU数量", "Batch Size", "基础配置吞吐量", "优化后吞吐量", "提升比例"],
}
EXTRA_HEADINGS = ["Baseline efficiency", "Optimized efficiency", "Baseline noise (95%)", "Optimized noise (95%)",
                  "Baseline config", "Optimized config"]


def describe(case: dict) -> str:
    """A short label that says exactly what ran."""
    parts = [case["strategy"], case["precision"]]
    if case["channels_last"]:
        parts.append("NHWC")
    if case.get("compile"):
        parts.append(f"compile:{case['compile']}")
    if case["device"] == "cuda" and case.get("cudnn_benchmark", True) is False:
        parts.append("cudnn-benchmark off")
    if case["strategy"] == "dp":
        knobs = [k for k, on in (("free-mem GPUs", case["dp_device_selection"] == "free_memory"),
                                 (f"out=gpu{case['dp_output_device']}", case["dp_output_device"] >= 0),
                                 ("loss in fwd", case["dp_loss_in_forward"])) if on]
        parts += knobs
    loader = case["loader"] + (f"/{case['dali_device']}/t{_threads(case['dali_threads'])}" if case["loader"] == "dali" else "")
    if case["loader"] == "torch":
        loader += f"/w{_threads(case['num_workers'])}" + ("/pin" if case["pin_memory"] else "")
    parts.append(loader + (" (loader only)" if case.get("loader_only") else ""))
    if case.get("accumulation_steps", 1) > 1:
        parts.append(f"accumulate {case['accumulation_steps']} ({case['accumulation_mode']})")
    return ", ".join(parts)


def _threads(n: int) -> str:
    return "auto" if n == -1 else str(n)  # -1: the machine's cores per rank, stored as loader_threads


def noise(r: dict | None) -> str:
    """The figure's 95% interval as +-percent; a record from before intervals shows its windows' spread."""
    if not r:
        return "-"
    m = r["metrics"]
    ci = m.get("images_per_s_ci95")
    if ci:
        return f"+-{100 * (ci[1] - ci[0]) / 2 / m['images_per_s']:.1f}%"
    return f"spread {m['spread_pct']:.1f}% (1 process)"


def _ok(records: list[dict]) -> list[dict]:
    return [r for r in records if r["status"] == "ok"]


def _by_name_and_gpus(records: list[dict], name: str) -> dict[int, dict]:
    """The newest ok record of a recipe per GPU count."""
    out = {}
    for r in sorted(_ok(records), key=lambda r: r.get("started_at", "")):
        if r["case"]["name"] == name:
            out[r["case"]["gpus"]] = r
    return out


def seed_rows(records: list[dict], optimized: str = "seed-optimized", baseline: str = "seed-baseline") -> list[list]:
    """One row per GPU count: the seeds' five columns, then efficiency, spread and configuration."""
    base, opt = _by_name_and_gpus(records, baseline), _by_name_and_gpus(records, optimized)
    rows = []
    for n in sorted(set(base) | set(opt)):
        b, o = base.get(n), opt.get(n)
        b_ips = b["metrics"]["images_per_s"] if b else None
        o_ips = o["metrics"]["images_per_s"] if o else None
        batch = (b or o)["metrics"]["global_batch"]
        improvement = f"{stats.improvement_pct(b_ips, o_ips):.1f}%" if b and o else "-"

        def eff(table, ips):
            one = table.get(1)
            return f"{stats.scaling_efficiency(ips, n, one['metrics']['images_per_s']):.1f}%" if one and ips else "-"

        rows.append([n, batch, _num(b_ips), _num(o_ips), improvement, eff(base, b_ips), eff(opt, o_ips),
                     noise(b), noise(o),
                     describe(b["case"]) if b else "-", describe(o["case"]) if o else "-"])
    return rows


def _num(x):
    return f"{x:.1f}" if x is not None else "-"


def seed_table(records: list[dict], lang: str = "en", fmt: str = "github", **names) -> str:
    rows = seed_rows(records, **names)
    if not rows:
        return "(no stored baseline/optimized pair: run the `seed` or `best` sweep)"
    return tabulate(rows, headers=HEADINGS[lang] + EXTRA_HEADINGS, tablefmt=fmt, disable_numparse=True)


def seed_frame(records: list[dict], lang: str = "en", **names) -> pd.DataFrame:
    return pd.DataFrame(seed_rows(records, **names), columns=HEADINGS[lang] + EXTRA_HEADINGS)


FULL_COLUMNS = ["sweep", "case", "GPUs", "batch/GPU", "batch (global)", "configuration", "status",
                "images/s", "images/s per GPU", "noise (95%)", "input stall %", "data wait %", "step ms (median)",
                "peak memory GiB", "all-reduces/step", "MFU %", "verdict", "reason"]


def full_rows(records: list[dict]) -> list[list]:
    rows = []
    for r in sorted(records, key=lambda r: (r["sweep"], r["case"]["gpus"], r["case"]["name"], r["case_id"])):
        m, c = r.get("metrics") or {}, r["case"]
        ok = r["status"] == "ok"
        rows.append([
            r["sweep"], c["name"], c["gpus"], c["batch_size"], c["batch_size"] * c["gpus"], describe(c),
            r["status"] + ("" if query.wrap(r).current else " (older definition)")
            + (f" (slowed {r['injected_slowdown_pct']:g}% on purpose)" if r.get("injected_slowdown_pct") else ""),
            f"{m['images_per_s']:.1f}" if ok else "-", f"{m['images_per_s_per_gpu']:.1f}" if ok else "-",
            noise(r) if ok else "-", _stall(m) if ok else "-", f"{m['data_wait_pct']:.1f}" if ok else "-",
            f"{m['step_time_median_s'] * 1000:.1f}" if ok else "-",
            f"{m['peak_memory_bytes'] / 2**30:.2f}" if ok else "-",
            _calls(m) if ok else "-", _mfu(r), _verdict(r), (r.get("reason") or "")[:120],
        ])
    return rows


def _stall(m: dict) -> str:
    v = m.get("input_stall_pct")
    return "-" if v is None else f"{v:.1f}"


def _diagnosis(r: dict) -> dict:
    """Stored with the result; derived here (without MFU, no peak known) for older results."""
    if "diagnosis" not in r:
        from .diagnose import diagnose
        r["diagnosis"] = diagnose(r) if r["status"] == "ok" and r.get("ranks") else {}
    return r["diagnosis"]


def _mfu(r: dict) -> str:
    v = _diagnosis(r).get("mfu_pct")
    return "-" if v is None else f"{v:.1f}"


def _verdict(r: dict) -> str:
    d = _diagnosis(r)
    return f"{d['verdict']} ({d['evidence']})" if d.get("verdict") else "-"


def _calls(m: dict) -> str:
    v = m.get("allreduce_calls_per_step")
    return "-" if v is None else f"{v:g}"


def full_table(records: list[dict], fmt: str = "github") -> str:
    return tabulate(full_rows(records), headers=FULL_COLUMNS, tablefmt=fmt, disable_numparse=True)


def full_frame(records: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(full_rows(records), columns=FULL_COLUMNS)


def environment_line(records: list[dict]) -> str:
    envs = {(r["machine"], r["env"].get("gpu_model"), r["env"].get("torch"), r["env"].get("cuda"),
             r["env"].get("commit", "")[:12], r["env"].get("dirty")) for r in records}
    return "; ".join(f"{m}: {g or 'no GPU'}, torch {t}, CUDA {c}, commit {cm}{' (dirty)' if d else ''}"
                     for m, g, t, c, cm, d in sorted(envs, key=str))


def render(records: list[query.Record], lang: str = "en", plots: dict | None = None) -> str:
    """Markdown for every machine and commit among the records, the latest run of each case."""
    if not records:
        return "no stored results found"
    groups = query.group(records, "machine", "commit")
    out = []
    for (machine, commit), recs in groups.items():
        if len(groups) > 1:
            out.append(f"# {machine}, commit {commit}\n")
        out.append(_render_group(query.latest(recs), lang, (plots or {}).get((machine, commit), [])))
    return "\n\n".join(out)


def noise_floor_lines(records: list[query.Record]) -> list[str]:
    lines = []
    for run_id, m in sorted(query.run_manifests(records).items()):
        start, end = m.get("noise_floor") or {}, m.get("noise_floor_end") or {}
        if "rel_sd" in start:
            text = (f"run {run_id}: noise floor {100 * start['rel_sd']:.2f}% (process-to-process sd of "
                    f"{start['case_id'].rsplit('-', 1)[0]} over {start['n']} fresh processes at the start)")
            if "rel_sd" in end:
                drift = 100 * (statistics.median(end["images_per_s"]) / statistics.median(start["images_per_s"]) - 1)
                text += f"; at the end {100 * end['rel_sd']:.2f}% over {end['n']}, median moved {drift:+.1f}%"
            lines.append(text)
        else:
            lines.append(f"run {run_id}: no noise floor measured; {m.get('processes', 1)} process(es) per case")
    return lines


def _render_group(recs: list[query.Record], lang: str, plot_files: list) -> str:
    records = query.dicts(recs)
    out = [query.describe_selection(recs)]
    out += noise_floor_lines(recs)
    out.append("")
    note = "" if any(r["case"]["strategy"] == "dp" and r["case"]["gpus"] > 1 for r in _ok(records)) else \
        "\n(no multi-GPU DataParallel case is stored here)"
    out.append("## Seed table: DataParallel baseline against the seed-optimized configuration" + note)
    out.append(seed_table(records, lang))
    if _by_name_and_gpus(records, "best"):
        out.append("\n## Baseline against the best configuration")
        out.append(seed_table(records, lang, optimized="best"))
    if plot_files:
        out.append("\n## Plots")
        out += [f"![{p.stem}]({p})" for p in plot_files]
    from . import targets
    if any(r["case"]["name"].startswith("target-") for r in records):
        out.append("\n## Performance targets")
        out.append(tabulate(targets.evaluate(records), headers=targets.HEADERS, tablefmt="github", disable_numparse=True))
    out.append("\n## The articles' claims, checked on this machine and commit")
    from . import claims
    out.append(tabulate(claims.table(recs), headers=claims.HEADERS, tablefmt="github", disable_numparse=True))
    files = claims.files_compared(recs, root=str(results.DEFAULT_ROOT))
    if files:
        out.append("\nFiles compared:\n" + "\n".join(f"- {ln}" for ln in files))
    out.append("\n## Every case")
    out.append(full_table(records))
    out.append(f"\nEnvironment: {environment_line(records)}")
    return "\n".join(out)


def write_report(records: list[query.Record], out_dir: Path, lang: str = "en") -> Path:
    """REPORT.md with the tables and PNG plots (under plots/) beside the results it reads."""
    from . import plots
    out_dir = Path(out_dir)
    groups = query.group(records, "machine", "commit")
    plot_links = {}
    for key, recs in groups.items():
        folder = out_dir / "plots" / (f"{key[0]}-{key[1]}" if len(groups) > 1 else "")
        plot_links[key] = [p.relative_to(out_dir) for p in plots.write_all(query.dicts(query.latest(recs)), folder, key)]
    path = out_dir / "REPORT.md"
    path.write_text("# Benchmark report\n\nRendered by `python -m bench report` from the stored results only.\n\n"
                    + render(records, lang, plot_links) + "\n")
    return path
