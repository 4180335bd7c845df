"""What `bench recommend` prints: per GPU count the best configuration, its yardsticks, every
candidate with its verdict, and what the budget left out."""
from __future__ import annotations

import textwrap

from tabulate import tabulate

from ..analysis.search import (
    CONFIRM_SWEEP,
    FINAL_SWEEP,
    SWEEP,
    Outcome,
    describe_case,
    difference,
    fed_start_crop,
    fed_start_queues,
    figure,
    judge,
    versus,
    winner_record,
)
from ..core.labels import noise


def _fig(record: dict) -> str:
    m = record["metrics"]
    ci = m.get("images_per_s_ci95")
    noise = f" (95% interval {ci[0]:,.1f}-{ci[1]:,.1f}, {m.get('processes', 1)} process(es))" if ci else \
        " (no interval)"
    return f"{m['images_per_s']:,.1f} images/s{noise}"


def render(outcomes: list[Outcome], budget_s: float, recipes: dict[int, str]) -> str:
    """Per GPU count: the best configuration, its figure, how it stands against the articles' set-ups
    and the runner-up, every candidate with its verdict, and what the budget left out."""
    lines = []
    for o in outcomes:
        unit = "GPU" if (o.best and o.best.case.device == "cuda") else "CPU rank"
        lines.append(f"## {o.gpus} {unit}(s): {len([c for c in o.candidates if c.record])} candidate(s) measured "
                     f"in {o.seconds / 60:.1f} min")
        win = winner_record(o)
        if o.best is None or figure(win) is None:
            lines.append("no configuration was measured successfully" + (f"; {o.skipped[0]}" if o.skipped else ""))
            continue
        lines += [f"best: {describe_case(o.best.case)}", f"  {_fig(win)}"]
        if o.best.stage == "yardstick":  # the search did not beat the articles' set-up within its budget
            lines += textwrap.wrap(o.best.note, 110, initial_indent="  ", subsequent_indent="  ")
        rows = []
        for key, name in (("baseline", "article's baseline"), ("optimized", "article's optimized")):
            ref = o.references.get(key)
            rows.append([f"{name} ({ref['case']['strategy']}, {ref['case']['precision']})" if ref else name,
                         _cell(ref), _noise(ref),
                         versus(judge(ref, win)) if figure(ref) else "not measured"])
        if o.runner_up:
            r = o.final_runner_up or o.runner_up.record
            rows.append([f"runner-up: {difference(o.best.case, o.runner_up.case)}", _cell(r), _noise(r),
                         versus(o.versus_runner_up)])
        for c in o.fed:
            share = (f"{100 * figure(c.record) / figure(win):.1f}% of synthetic; {versus(judge(win, c.record))}"
                     if figure(c.record) else "-")
            rows.append([f"JPEGs: {fed_source(c.case, o.best.case)}" + (" (fed winner)" if c is o.fed_best else ""),
                         _cell(c.record), _noise(c.record), share])
        lines.append("\n" + tabulate(rows, headers=["yardstick", "images/s", "95% interval", "the best against it"],
                                     tablefmt="github", disable_numparse=True))
        if o.gpus in recipes:
            lines.append(f"\nrecipe: {recipes[o.gpus]}")
        if (o.gpus, "jpeg") in recipes:
            lines.append(f"recipe fed by JPEGs ({fed_source(o.fed_best.case, o.best.case)}): {recipes[(o.gpus, 'jpeg')]}")
        elif o.best.case.strategy == "dp":
            lines += [""] + textwrap.wrap("recipe: none written (recipes cover single and ddp set-ups); the stored "
                                          f"case {o.best.case.case_id} reproduces it with `bench run`", 110)
        rows = [[c.stage, difference(c.against, c.case) if c.against else describe_case(c.case), _cell(c.record),
                 _noise(c.record), c.note] for c in o.candidates if c.record]
        rows += [[c.stage, f"fed by JPEGs: {fed_source(c.case, o.best.case)}", _cell(c.record), _noise(c.record), c.note]
                 for c in o.fed if c.record]
        lines.append("\n" + tabulate(rows, headers=["stage", "candidate: the change tried", "images/s", "95% interval",
                                                    "against the best then"],
                                     tablefmt="github", disable_numparse=True))
        if o.skipped:
            lines += [""] + textwrap.wrap("not measured: " + "; ".join(o.skipped), 110)
        lines.append("")
    lines.append(f"budget {budget_s / 60:.1f} min; every candidate is stored (sweeps {SWEEP!r}, {CONFIRM_SWEEP!r} "
                 f"and {FINAL_SWEEP!r})")
    return "\n".join(lines)


def fed_source(case, synthetic=None) -> str:
    """The loader and the knobs it was tried with, in a cell; and the step, where it is not the one of
    the synthetic winner it feeds."""
    step = ""
    if synthetic is not None:
        step += ", eager step" if synthetic.cuda_graph and not case.cuda_graph else ""
        step += f", {case.compile_wrapper} wrapper" if case.compile_wrapper != synthetic.compile_wrapper else ""
        step += f", batch {case.batch_size}" if case.batch_size != synthetic.batch_size else ""
    if case.loader != "dali":
        return f"{case.loader} DataLoader{step}"
    knobs = [f"dali {case.dali_device}"]
    if case.hw_decoder_load != -1:
        knobs.append(f"hw share {case.hw_decoder_load:g}")
    if case.dali_threads != -1:
        knobs.append(f"{case.dali_threads} threads")
    if case.dali_prefetch_depth != 2:
        knobs.append(f"queue {case.dali_prefetch_depth}")
    if case.device == "cuda" and case.dali_handoff == "stream":
        knobs.append("to the stream")
    if case.dali_crop != fed_start_crop(case.device):  # said where it differs from where the fed search starts
        knobs.append("whole decode" if case.dali_crop == "resize" else "crop decoded")
    if case.dali_cpu_share > 0:
        knobs.append(f"{case.dali_cpu_share:.0%} CPU-decoded")
    if case.step_stream == "own":
        knobs.append("own stream")
    if case.cuda_max_connections != fed_start_queues(case.device):  # likewise
        knobs.append(f"{case.cuda_max_connections} CUDA queues" if case.cuda_max_connections
                     else "default queues")
    return ", ".join(knobs) + step


def _cell(record: dict | None) -> str:
    return f"{figure(record):,.1f}" if figure(record) else (record["status"] if record else "not measured")


def _noise(record: dict | None) -> str:
    return noise(record["metrics"]) if figure(record) else "-"
