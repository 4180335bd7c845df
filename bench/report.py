"""Tables from stored results only: the seeds' table (baseline against optimized per GPU count)
and a full table of every case with its configuration."""
from __future__ import annotations

import statistics
import textwrap
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from . import claims, i18n, query, results, stats

HEADINGS = {
    "en": ["GPUs", "Batch size (global)", "Baseline throughput (images/s)",
           "Optimized throughput (images/s)", "Improvement"],
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
        parts.append(f"compile:{case['compile']}" + ("/step" if case.get("compile_scope") == "step" else "")
                     + (" (CUDA graphs)" if case["compile"] in ("reduce-overhead", "max-autotune") else ""))
    if case.get("optimizer_impl", "default") != "default":
        parts.append(f"SGD {case['optimizer_impl']}")
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
    return f"(spread {m['spread_pct']:.1f}%)"  # one process's windows only: no interval


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
    """Every column, and the full case id (the tables show a short label)."""
    ordered = sorted(records, key=lambda r: (r["sweep"], r["case"]["gpus"], r["case"]["name"], r["case_id"]))
    frame = pd.DataFrame(full_rows(ordered), columns=FULL_COLUMNS)
    frame.insert(2, "case id", [r["case_id"] for r in ordered])
    return frame


def environment_line(records: list[dict]) -> str:
    envs = {(r["machine"], r["env"].get("gpu_model"), r["env"].get("torch"), r["env"].get("cuda"),
             r["env"].get("commit", "")[:12], r["env"].get("dirty")) for r in records}
    return "; ".join(f"{m}: {g or 'no GPU'}, torch {t}, CUDA {c}, commit {cm}{' (dirty)' if d else ''}"
                     for m, g, t, c, cm, d in sorted(envs, key=str))


WIDTH = 120       # every default line fits a terminal of this many columns
ARTICLE_GPU_COUNTS = (1, 2, 4)  # the rows of the article's table


def render(records: list[query.Record], lang: str = "en", plots: dict | None = None, wide: bool = False) -> str:
    """Text for every machine and commit among the records (never mixed in one table), the latest run
    of each case: the article's table first, then a summary, then the details; `wide` adds every column."""
    if not records:
        return "no stored results found"
    groups = query.group(records, "machine", "commit")
    out = []
    for (machine, commit), recs in groups.items():
        out.append(f"# {i18n.t(lang, 'group', machine=machine, commit=commit)}\n")
        out.append(_render_group(query.latest(recs), lang, (plots or {}).get((machine, commit), []), wide))
    return "\n\n".join(out)


def display_width(line: str) -> int:
    """Terminal columns a line takes: a Chinese character takes two (wcwidth, where installed)."""
    try:
        from wcwidth import wcswidth
    except ImportError:
        return len(line)
    return max(wcswidth(line), len(line))


def wrap(text: str, indent: str = "  ") -> list[str]:
    """Lines of at most WIDTH terminal columns."""
    width = WIDTH
    while True:
        lines = textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False) or [""]
        if width <= 40 or all(display_width(ln) <= WIDTH for ln in lines):
            return lines
        width -= 8


def _table(rows, headers, align=None, max_widths=None) -> str:
    """A markdown table; `max_widths` wraps long cells (a long label takes two lines, not 20 columns)."""
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True,
                    colalign=align or ("left",) * len(headers), maxcolwidths=max_widths)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _gpu_count(records: list[dict]) -> int:
    return max((r["env"].get("gpu_count") or 0 for r in records), default=0)


def article_table(records: list[dict], lang: str, optimized: str = "seed-optimized") -> tuple[str, list[str], list]:
    """The article's five columns exactly, numbers right-aligned; each missing cell says why in a note.
    Returns (table, notes, [(GPUs, baseline record, optimized record)])."""
    names = ("seed-baseline", optimized)
    mine = [r for r in records if r["case"]["name"] in names]
    if not mine:
        return i18n.t(lang, "no_pair"), [], []
    # the table's per-GPU batch: the recipes' own (a run at another batch, an OOM probe say, is not a cell)
    per_gpu = statistics.mode(r["case"]["batch_size"] for r in mine)
    mine = [r for r in mine if r["case"]["batch_size"] == per_gpu]
    ok = {n: _by_name_and_gpus(mine, n) for n in names}
    tried = {n: {r["case"]["gpus"]: r for r in sorted(mine, key=lambda r: r.get("started_at", ""))
                 if r["case"]["name"] == n} for n in names}
    stored = set(tried[names[0]]) | set(tried[names[1]])
    on_gpus = any(r["case"]["device"] == "cuda" for r in mine)
    counts = sorted(stored | (set(ARTICLE_GPU_COUNTS) if on_gpus else set()))
    machine_gpus = _gpu_count(records)
    rows, notes, pairs = [], [], []
    for n in counts:
        cells = []
        for name, side in zip(names, i18n.t(lang, "sides")):
            r = ok[name].get(n)
            cells.append(r["metrics"]["images_per_s"] if r else None)
            if not r:
                failed = tried[name].get(n)
                why = (i18n.t(lang, "failed", status=f"{failed['status']}: {failed.get('reason', '')}"[:160]) if failed
                       else i18n.t(lang, "not_run_gpus", n=n) if on_gpus and n > machine_gpus
                       else i18n.t(lang, "not_stored"))
                notes += wrap("- " + i18n.t(lang, "missing_cell", n=n, side=side, why=why))
        b, o = cells
        improvement = f"{stats.improvement_pct(b, o):+.1f}%" if b and o else "-"
        rows.append([str(n), f"{per_gpu * n:,}", _fmt(b), _fmt(o), improvement])
        pairs.append((n, ok[names[0]].get(n), ok[names[1]].get(n)))
    return _table(rows, i18n.t(lang, "seed_cols"), ("right",) * 5), notes, pairs


def details_table(pairs: list, lang: str) -> tuple[str, list[str]]:
    """Efficiency and the 95% interval of each cell of the article's table, and what ran."""
    one_b = next((b for n, b, _ in pairs if n == 1 and b), None)
    one_o = next((o for n, _, o in pairs if n == 1 and o), None)

    def eff(r, one, n):
        return (f"{stats.scaling_efficiency(r['metrics']['images_per_s'], n, one['metrics']['images_per_s']):.1f}%"
                if r and one else "-")
    rows = [[str(n), eff(b, one_b, n), eff(o, one_o, n), noise(b), noise(o)] for n, b, o in pairs if b or o]
    configs = sorted({(describe(b["case"]) if b else "-", describe(o["case"]) if o else "-") for _, b, o in pairs if b or o})
    notes = [ln for bc, oc in configs for ln in wrap(i18n.t(lang, "configs", b=bc, o=oc))]
    return _table(rows, i18n.t(lang, "details_cols"), ("right",) * 5), notes


def _judgeable(records: list[dict]) -> list[dict]:
    return [r for r in _ok(records) if not r["case"].get("loader_only") and not r.get("injected_slowdown_pct")]


def short_labels(records: list[dict]) -> dict[str, str]:
    """Case id -> its recipe name, plus the knobs that tell apart records sharing that name."""
    by_name: dict = {}
    for r in records:
        by_name.setdefault(r["case"]["name"], []).append(r)
    labels = {}
    for name, recs in by_name.items():
        keys = sorted({k for a in recs for b in recs for k in claims.differing_fields(a["case"], b["case"])} - {"gpus"})
        for r in recs:
            c = r["case"]
            knobs = [("NHWC" if c[k] else "NCHW") if k == "channels_last" else f"{k}={c[k]}" for k in keys]
            labels[r["case_id"]] = name + (f" [{', '.join(knobs)}]" if knobs else "")
    return labels


def summary_lines(records: list[dict], evals: list, lang: str) -> list[str]:
    lines, labels = [], short_labels(records)
    current = [r for r in _judgeable(records) if query.wrap(r).current]
    judged = current or _judgeable(records)  # only older records here: shown, marked *
    mark = "" if current else "*"
    for n in sorted({r["case"]["gpus"] for r in judged}):
        top = max((r for r in judged if r["case"]["gpus"] == n), key=lambda r: r["metrics"]["images_per_s"])
        lines += wrap("- " + i18n.t(lang, "best_found", label=f"{labels[top['case_id']]}{mark} ({describe(top['case'])}, "
                                                               f"{n} GPU(s))", ips=_fmt(top["metrics"]["images_per_s"]),
                                    sweep=top["sweep"]))
    for many in sorted(judged, key=lambda r: (r["case"]["name"], r["case"]["gpus"])):
        n = many["case"]["gpus"]
        # against one GPU at exactly the same settings: the case differs in its GPU count alone
        one = next((r for r in judged if r["case"]["gpus"] == 1 and n > 1
                    and claims.differing_fields(r["case"], many["case"]) == {"gpus"}), None)
        if one:
            eff = stats.scaling_efficiency(many["metrics"]["images_per_s"], n, one["metrics"]["images_per_s"])
            lines += wrap("- " + i18n.t(lang, "efficiency", name=labels[many["case_id"]], n=n, eff=f"{eff:.1f}%"))
    counts = {v: 0 for v in (claims.HOLDS, claims.FAILS, claims.INCONCLUSIVE, claims.CANNOT)}
    for _, e in evals:
        counts[e["verdict"]] += 1
    lines += wrap("- " + i18n.t(lang, "claims_count", holds=counts[claims.HOLDS], fails=counts[claims.FAILS],
                                inconclusive=counts[claims.INCONCLUSIVE], cannot=counts[claims.CANNOT]))
    return lines


def runs_used_lines(records: list[query.Record], lang: str = "en") -> list[str]:
    """Which runs a table used, by the stated rule, and how many records it only shows."""
    ids = query.runs_of(records)
    lines = wrap(i18n.t(lang, "runs_used", runs=", ".join(ids[:4]) + (f" +{len(ids) - 4}" if len(ids) > 4 else "")))
    old = sum(not r.current for r in records)
    return lines + (wrap(i18n.t(lang, "old_defs", n=old)) if old else [])


def noise_floor_lines(records: list[query.Record], lang: str = "en") -> list[str]:
    lines = runs_used_lines(records, lang)
    for run_id, m in sorted(query.run_manifests(records).items()):
        start, end = m.get("noise_floor") or {}, m.get("noise_floor_end") or {}
        if "rel_sd" in start:
            text = i18n.t(lang, "floor", run=run_id, sd=f"{100 * start['rel_sd']:.2f}",
                          case=start["case_id"].rsplit("-", 1)[0], n=start["n"])
            if "rel_sd" in end:
                drift = 100 * (statistics.median(end["images_per_s"]) / statistics.median(start["images_per_s"]) - 1)
                text += i18n.t(lang, "floor_end", sd=f"{100 * end['rel_sd']:.2f}", n=end["n"], drift=f"{drift:+.1f}")
            lines += wrap(text)
        else:
            lines += wrap(i18n.t(lang, "no_floor", run=run_id, k=m.get("processes", 1)))
    return lines


def cases_table(records: list[dict], lang: str) -> tuple[str, list[str]]:
    labels = short_labels(records)
    rows, notes = [], []
    for r in sorted(records, key=lambda r: (r["sweep"], r["case"]["gpus"], r["case"]["name"], r["case_id"])):
        m, ok = r.get("metrics") or {}, r["status"] == "ok"
        mark = "" if query.wrap(r).current else "*"
        label = labels[r["case_id"]] + mark
        if r.get("injected_slowdown_pct"):
            label += f" (slowed {r['injected_slowdown_pct']:g}%)"
        bound = i18n.word(lang, (_diagnosis(r) or {}).get("verdict", "")) if ok else i18n.word(lang, r["status"])
        ci = m.get("images_per_s_ci95")
        rows.append([r["sweep"], label, str(r["case"]["gpus"]), _fmt(m.get("images_per_s")) if ok else "-",
                     noise(r) if ok and ci else "-", _stall(m) if ok else "-", bound or "-"])
        if not ok:
            notes += wrap(f"- {labels[r['case_id']]}: {r['status']}: {r.get('reason', '')}"[:600])
    if any(not query.wrap(r).current for r in records):
        notes.append(i18n.t(lang, "old_mark"))
    return _table(rows, i18n.t(lang, "cases_cols"), ("left", "left", "right", "right", "right", "right", "left"),
                  [12, 40, None, None, None, None, 14]), notes


def claims_section(evals: list, lang: str) -> list[str]:
    rows = [[c.id, i18n.word(lang, e["verdict"]), e["effect"]] for c, e in evals]
    out = [_table(rows, i18n.t(lang, "claims_cols")), "", f"{i18n.t(lang, 'evidence')}:"]
    for c, e in evals:
        out += wrap(f"- {c.id} ({c.source}): {i18n.claim_text(lang, c)} {e['evidence']}")
    files = claims.files_compared(evals, root=str(results.DEFAULT_ROOT))
    if files:
        out += ["", f"{i18n.t(lang, 'files')}:"] + [ln for f in files for ln in wrap(f"- {f}")]
    return out


def targets_section(records: list[dict], lang: str) -> list[str]:
    from . import targets
    rows = targets.evaluate(records)
    out = [_table([[r[0], r[1], r[2], i18n.word(lang, r[3])] for r in rows], i18n.t(lang, "targets_cols"))]
    return out + [ln for r in rows if r[4] or r[5] for ln in wrap(f"- {r[0]}: {r[4]}" + (f" ({r[5]})" if r[5] else ""))]


def _render_group(recs: list[query.Record], lang: str, plot_files: list, wide: bool = False) -> str:
    records = query.dicts(recs)
    out = []
    for optimized, title in (("seed-optimized", "seed_title"), ("best", "best_title")):
        if optimized == "best" and not any(r["case"]["name"] == "best" for r in records):
            continue
        table, notes, pairs = article_table(records, lang, optimized)
        out += [f"## {i18n.t(lang, title)}", table] + notes
        if any(b or o for _, b, o in pairs):
            details, config_notes = details_table(pairs, lang)
            out += ["", i18n.t(lang, "details_title") + ":", details] + config_notes
        out.append("")
    evals = claims.evaluations(recs)  # judged once, for the summary and the claims section
    out += [f"## {i18n.t(lang, 'summary_title')}"] + summary_lines(records, evals, lang)
    out += ["", f"## {i18n.t(lang, 'runs_title')}"] + noise_floor_lines(recs, lang)
    if plot_files:
        out += ["", f"## {i18n.t(lang, 'plots_title')}"] + [f"![{p.stem}]({p})" for p in plot_files]
    if any(r["case"]["name"].startswith("target-") for r in records):
        out += ["", f"## {i18n.t(lang, 'targets_title')}"] + targets_section(records, lang)
    out += ["", f"## {i18n.t(lang, 'claims_title')}"] + claims_section(evals, lang)
    table, notes = cases_table(records, lang)
    out += ["", f"## {i18n.t(lang, 'cases_title')}", table] + notes
    if wide:
        out += ["", "## Seed table, every column", seed_table(records, lang), "", "## Every case, every column",
                full_table(records)]
    out += [""] + wrap(f"{i18n.t(lang, 'environment')}: {environment_line(records)}")
    return "\n".join(out)


def write_report(records: list[query.Record], out_dir: Path, lang: str = "en", wide: bool = False) -> Path:
    """REPORT.md with the tables and PNG plots (under plots/) beside the results it reads."""
    from . import plots
    out_dir = Path(out_dir)
    groups = query.group(records, "machine", "commit")
    plot_links = {}
    for key, recs in groups.items():
        folder = out_dir / "plots" / (f"{key[0]}-{key[1]}" if len(groups) > 1 else "")
        plot_links[key] = [p.relative_to(out_dir) for p in plots.write_all(query.dicts(query.latest(recs)), folder, key)]
    path = out_dir / "REPORT.md"
    path.write_text("# Benchmark report\n\nRendered by `bin/bench report` from the stored results only.\n\n"
                    + render(records, lang, plot_links, wide) + "\n")
    return path
