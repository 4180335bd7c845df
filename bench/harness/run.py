"""One invocation of the suite: its id, environment, noise floor and lock, and the cases it runs one
after another, each stored as soon as it exists."""
from __future__ import annotations

import os
import sys
import time

from ..analysis import plan
from ..core import phases, stats
from ..core.case import Case
from ..core.labels import duration
from ..store import query
from ..store.tree import Store, commit_folder, new_run_id, save_fallback
from . import env as envmod
from .env import now_iso
from . import launch, records
from .checks import check_data, check_gpus, check_models, check_nodes
from .dist import DistArgs
from .gpu_guard import GpuGuard
from .signals import terminate_as_interrupt


class Run:
    """One invocation of the suite: its id, environment, processes per case and the machine's
    process-to-process noise floor, measured in the same run and kept in its manifest."""

    def __init__(self, store: Store, dist: DistArgs = DistArgs(), processes: int = 1, out=None,
                 live: bool | None = None, software_now: bool = True, shared_gpu: bool = False):
        if processes < 1:
            raise ValueError(f"processes={processes} must be >= 1")
        # sys.stdout as it is when the run starts, not when this module was imported: a caller that redirects it
        # (contextlib.redirect_stdout) gets the run's lines
        out = sys.stdout if out is None else out
        self.store, self.dist, self.processes, self.out = store, dist, processes, out
        # what a running process is doing, on one line rewritten in place: a terminal only, so logs stay clean
        self.live = out.isatty() if live is None and hasattr(out, "isatty") else bool(live)
        # software_now False: the versions (which import torch) are read at begin(), by then perhaps
        # handed over by the machine's priming process
        self.env = envmod.collect(software=software_now)
        self.run_id = new_run_id()
        self.machine, self.commit = envmod.machine_slug(self.env), commit_folder(self.env)
        self.floor = None
        self.floor_runs: tuple[Case, list[dict]] | None = None  # the start floor's reference and process results
        self.stores = dist.nnodes == 1 or dist.node_rank == 0
        self.begun = False
        self._peaks: dict[str, dict] = {}
        # whether the GPUs are this run's alone, before it starts and around every process (--shared-gpu: marked)
        self.guard = GpuGuard(shared_gpu, dist.nnodes)
        self.manifest = {"run_id": self.run_id, "machine": self.machine, "commit_folder": self.commit,
                         "started_at": now_iso(), "processes": processes, "sweeps": [], "noise_floor": None,
                         "noise_floor_end": None, "env": self.env, "shared_gpu": shared_gpu}

    def check(self, cases: list[Case]) -> None:
        """What can refuse the run before its data exists, one line each: GPUs, nodes and models."""
        check_gpus(cases, envmod.visible_gpu_count(), self.dist)
        check_nodes(cases, self.dist)
        check_models(cases)

    def begin(self, cases: list[Case]) -> None:
        """Everything that can refuse the run, in one line each, before anything is measured: GPUs,
        nodes, data folders, then the results folder (writable, with room) and its lock."""
        self.check(cases)
        check_data(cases)
        self.claim(cases)
        if "torch" not in self.env:
            self.env.update(envmod.software_versions())  # the manifest holds this same dict

    def claim(self, cases: list[Case]) -> None:
        """The GPUs the cases use (nobody else's work on them, or --shared-gpu), the results folder
        (writable, with room) and its lock, so that no other run of the suite measures beside this one;
        GpuBusy or StoreError says why not."""
        if not self.begun:
            seen = self.guard.before_run(cases, self.run_id)
            if seen:
                self.manifest["gpu_shared_before_run"] = seen
        if self.stores and not self.begun:
            self.store.check_writable(self.machine, self.commit)
            self.store.lock(self.machine, f"pid {os.getpid()}, run {self.run_id}, started {now_iso()}")
        self.begun = True

    def progress(self, text: str | None) -> None:
        """Rewrite the live line with `text` (None clears it); within 120 columns."""
        if self.live:
            self.out.write("\r\033[K" + (f"  {text}"[:119] if text else ""))
            self.out.flush()

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def peak(self, device: str) -> dict:
        """The machine's measured matmul peak (for MFU), measured or read once per run."""
        if device not in self._peaks:
            self._peaks[device] = records.machine_peak(self.store, self.env, device)
        return self._peaks[device]

    def save(self) -> None:
        if self.stores:
            self.store.save_run(self.manifest)

    def measure_floor(self, reference: Case, n: int, at: str = "start", then: Case | None = None) -> dict | None:
        """The reference case in n fresh processes; their spread is this run's noise floor. `then`: the
        case run after it, started ahead."""
        if n < 2:
            return None
        print(f"noise floor ({at} of run {self.run_id}): {reference.case_id} in {n} fresh processes",
              file=self.out, flush=True)
        figures, walls, spent, reason, results = [], [], [], "", []
        for i in range(n):
            print(f"  process {i + 1} of {n}", file=self.out, flush=True)
            r = records.run_case(reference, self.dist, then=reference if i + 1 < n else then,
                                 on_phase=self.progress if self.live else None, guard=self.guard)
            self.progress(None)
            spent.append(records.phases_of(r))
            if r.get("wall_s"):
                walls.append(r["wall_s"])
            if r["status"] != "ok":
                reason = f"{r['status']}: {r['reason']}"
                break
            figures.append(r["metrics"]["images_per_s"])
            results.append(r)
        if at == "start" and len(results) == n:
            self.floor_runs = (reference, results)
        return self.adopt_floor(reference, figures if len(figures) == n else [], reason, at, walls, spent)

    def measured_by_floor(self, case: Case, processes: int) -> list[dict]:
        """The start floor's process results where they measured this very case (the reference under
        another name, e.g. `best` on one GPU) in at least `processes` fresh processes: the case is then
        not run again. Empty otherwise."""
        if self.floor_runs is None or self.floor is None:
            return []
        reference, results = self.floor_runs
        same = case.replace(name=reference.name).to_dict() == reference.to_dict()
        return results if same and processes <= len(results) else []

    def adopt_floor(self, reference: Case, figures: list[float], reason: str = "", at: str = "start",
                    walls: list[float] | None = None, phases: list[dict] | None = None) -> dict:
        """Keep these fresh-process figures of the reference case as the run's noise floor (and print it);
        `walls`, each process's seconds, let a later --dry-run say what a floor costs here."""
        n = len(figures)
        floor = {**(stats.noise_floor(figures) if n >= 2 else {"error": reason or "not measured"}),
                 "case_id": reference.case_id, "case": reference.to_dict()}
        if walls:
            floor["process_wall_s"] = walls
        if phases:
            floor["phases_s"] = phases
        key = "noise_floor" if at == "start" else "noise_floor_end"
        self.manifest[key] = floor
        if at == "start" and "rel_sd" in floor:
            self.floor = floor
        print("  " + (f"{n} processes: {', '.join(f'{x:,.1f}' for x in figures)} images/s, "
                      f"process-to-process sd {100 * floor['rel_sd']:.2f}%" if "rel_sd" in floor
                      else f"not measured ({floor['error']}); intervals then come from each case's own processes"),
              file=self.out, flush=True)
        self.save()
        return floor

    def finish(self, interrupted: bool = False) -> None:
        launch.discard_ahead()
        self.manifest.update(finished_at=now_iso(), interrupted=interrupted)
        try:
            self.save()
        finally:
            self.store.unlock()
            self.guard.release()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, kind, error, trace) -> None:
        """A run that ends by an exception (Ctrl-C, a signal, a refusal) is kept as interrupted."""
        self.finish(interrupted=kind is not None)


def run_cases(run: Run, cases: list[Case], sweep: str, resume: bool = False, measured: dict | None = None,
              processes: int | None = None, header: bool = True, then: Case | None = None) -> list[dict]:
    """Run each case in fresh processes and store it as soon as it exists. `resume` continues this
    commit's latest interrupted run of this sweep (and the runs it continued): the cases they stored as
    ok are skipped, the rest run; `measured` (case id -> record) carries the cases an
    earlier sweep of the same run measured, so an identical case is not run twice; `processes`
    overrides the run's processes per case; `header` False leaves out the sweep's opening and closing
    lines (a search that runs its cases one at a time); `then`, the case run after these, is started
    ahead like each next case of the list."""
    run.begin(cases)
    out, store = run.out, run.store
    device = "cuda" if any(c.device == "cuda" for c in cases) else "cpu"
    peak = run.peak(device)
    processes = processes or run.processes
    if sweep not in run.manifest["sweeps"]:
        run.manifest["sweeps"].append(sweep)
    run.save()
    if header:
        print(f"sweep {sweep!r}: {len(cases)} case(s) on {run.machine}, commit {run.commit}, run {run.run_id}, "
              f"{processes} process(es) per case, results in {store.sweep_dir(run.machine, run.commit, sweep)}",
              file=out, flush=True)
    stored = query.load([store.root / run.machine])[0] if (store.root / run.machine).is_dir() else []
    clock = _Clock(plan.per_process_times(stored), processes)
    resumed = query.interrupted_runs(stored, run.machine, run.commit, sweep, exclude=run.run_id) if resume else []
    if resume:
        print(f"--resume: continuing run {resumed[0]} of sweep {sweep!r}, interrupted: its cases stored as ok are kept"
              if resumed else f"--resume: no interrupted run of sweep {sweep!r} at {run.commit}; running every case",
              file=out, flush=True)
        run.manifest["resumed_runs"] = resumed
    kept = [r for r in stored if r.run_id in resumed]
    done: list[dict] = []
    say = run.say
    with terminate_as_interrupt():
        for i, case in enumerate(cases, 1):
            where = f"[{i}/{len(cases)}] {case.case_id}"
            before = query.latest_status(kept, run.machine, run.commit, sweep, case.case_id) if resumed else None
            if before == "ok":
                say(f"{where}: already stored, skipped (--resume)")
                continue
            if before:  # a failure or a skip may have had a passing cause (DALI missing, a timeout)
                say(f"{where}: stored as {before}, running it again (--resume)")
            if measured is not None and measured.get(case.case_id, {}).get("measured_as_claim") \
                    and measured[case.case_id]["sweep"] == sweep:
                done.append(measured[case.case_id])
                say(f"{where}: measured in this run's claim experiments "
                    f"({len(done[-1].get('processes') or [])} processes), stored")
                continue
            if measured is not None and case.case_id in measured:
                done.append(keep(run, records.reused(measured[case.case_id], sweep)))
                say(f"{where}: measured in sweep {done[-1]['reused_from_sweep']!r} of this run, stored here too")
                continue
            started = now_iso()
            if floor_runs := run.measured_by_floor(case, processes):
                result = records.combine(case, floor_runs, run.floor)
                record = records.assemble(case, result, sweep, run.env, started, peak, run.run_id)
                done.append(keep(run, {**record, "measured_as_floor": run.floor["case_id"]}))
                if measured is not None:
                    measured[case.case_id] = done[-1]
                say(f"{where}: measured as this run's noise floor ({len(floor_runs)} processes of "
                    f"{run.floor['case_id']}), stored here")
                say(records.summary_line(done[-1]))
                continue
            say(f"{where} ({clock.status(cases[i - 1:])})" if header
                else case.case_id + (f" ({processes} processes)" if processes > 1 else ""))
            result = records.measure(case, processes, run.floor, run.dist, then=cases[i] if i < len(cases) else then,
                                     on_phase=run.progress if run.live else None, guard=run.guard)
            run.progress(None)
            clock.add(case, result)
            done.append(keep(run, records.assemble(case, result, sweep, run.env, started, peak, run.run_id)))
            if measured is not None:
                measured[case.case_id] = done[-1]
            say(records.summary_line(done[-1]) if run.stores else records.node_line(done[-1], run.dist.node_rank))
    if header:
        own = [r for r in done if not r.get("reused_from_sweep") and not r.get("measured_as_floor")]
        spent = phases.total([p.get("phases_s") or {} for r in own for p in r.get("processes") or []])
        line = phases.summary_text(spent, sum(len(r.get("processes") or []) for r in own))
        say(f"sweep {sweep!r} finished in {duration(time.monotonic() - clock.t0)}" + (f"; {line}" if line else ""))
    return done


def keep(run: Run, record: dict) -> dict:
    """Store the record (where this node stores); a folder that failed after the measurement keeps
    the figure in a fallback file, and the sweep goes on."""
    if run.stores:
        try:
            run.store.save(record)
        except OSError as e:
            print(f"  could not store the result ({e.__class__.__name__}: {e}); saved it to "
                  f"{save_fallback(record, e)}", file=run.out, flush=True)
    return record


class _Clock:
    """A sweep's elapsed time and its time left: per recipe this machine's stored time, else a guess
    from this sweep's measured phases (analysis/plan.guess_s)."""

    def __init__(self, stored_times: dict, processes: int):
        self.stored_times, self.processes = stored_times, processes
        self.t0 = time.monotonic()
        self.taken: list[dict] = []  # this sweep's processes so far: launcher, time outside windows, per window

    def add(self, case: Case, record: dict) -> None:
        steps = (record.get("metrics") or {}).get("steps_per_window")
        for p in record.get("processes") or []:
            spent = p.get("phases_s") or {}
            if "windows_s" in spent and steps:
                outside = sum(v for k, v in spent.items() if k not in ("windows_s", "after_s", "started_ahead_s"))
                micro = spent["windows_s"] / (case.repeats * steps * case.accumulation_steps)
                self.taken.append({"launcher": case.launcher, "outside_s": outside, "micro_step_s": micro})

    def status(self, remaining: list[Case]) -> str:
        text = f"elapsed {duration(time.monotonic() - self.t0)}"
        per = [plan.expected_s(c, self.stored_times) or plan.guess_s(c, self.taken) for c in remaining]
        if any(p is None for p in per):
            return text
        return text + f", about {duration(sum(per) * self.processes)} left"
