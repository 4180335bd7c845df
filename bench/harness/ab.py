"""A side-by-side A/B: two trees measured in one run on one machine, their processes interleaved
(analysis/ab.py's order), each from its own checkout with the same interpreter and data, judged by
paired differences pooled with the run's noise floor. Everything measured is kept in one file under
<machine>/comparisons/, written as the run goes, so an interrupted A/B keeps its finished pairs."""
from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass, field

from ..analysis import ab as abplan
from ..analysis import compare as comparemod
from ..analysis import plan
from ..core import phases, recipes, sharing, stats
from ..core.case import Case
from ..core.files import write_json_atomic
from ..core.labels import duration
from ..store import query
from ..store.tree import Store, new_run_id
from . import env as envmod
from . import launch, records
from .checks import check_data, check_gpus
from .gpu_guard import GpuGuard
from .run import now_iso
from .sides import Side
from .signals import terminate_as_interrupt


@dataclass
class Settings:
    threshold_pct: float = 3.0
    budget_s: float = 600.0
    pairs: int | None = None
    floor_processes: int = 3
    fail_under_pct: float = 0.0
    shared_gpu: bool = False


@dataclass
class CaseState:
    case: Case
    sweep: str
    figures: dict = field(default_factory=lambda: {"a": [], "b": []})
    failed: dict = field(default_factory=dict)
    shared: list = field(default_factory=list)
    """What was seen on the GPUs around or during this case's processes (harness/gpu_guard.py)."""


def kind(a: Side, b: Side) -> str:
    """`A/A` when both sides are the same clean commit (or the same folder) with the same variables."""
    same = (a.commit and a.commit == b.commit and not a.dirty and not b.dirty) or a.root == b.root
    return "A/A" if same and a.env == b.env else "A/B"


class AbRun:
    def __init__(self, sides: tuple[Side, Side], cases: list[tuple[str, Case]], store: Store, settings: Settings,
                 out=None):
        self.a, self.b = sides
        self.states = [CaseState(c, sweep) for sweep, c in cases]
        self.store, self.settings, self.out = store, settings, sys.stdout if out is None else out
        self.env = envmod.collect()
        self.machine, self.run_id = envmod.machine_slug(self.env), new_run_id()
        self.path = store.root / self.machine / "comparisons" / f"ab-{self.run_id}.json"
        self.floor: dict | None = None
        self.processes: list[dict] = []
        self.plan: abplan.PairPlan | None = None
        self.t0 = time.monotonic()
        self.interrupted = True
        self.guard = GpuGuard(settings.shared_gpu)
        self.shared_before: list[dict] = []

    def side(self, name: str) -> Side:
        return self.a if name == "a" else self.b

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # --- the run --------------------------------------------------------------------------------
    def execute(self) -> comparemod.Comparison:
        cases = [s.case for s in self.states]
        check_gpus(cases, envmod.visible_gpu_count())
        check_data(cases)
        self.shared_before = self.guard.before_run(cases, self.run_id)
        self.store.check_writable(self.machine, "comparisons")
        self.store.lock(self.machine, f"pid {os.getpid()}, A/B {self.run_id}, started {now_iso()}")
        try:
            with terminate_as_interrupt():
                self.say(f"A/B {self.run_id} on {self.machine}: {len(cases)} case(s)\n  a: {self.a.label()}\n"
                         f"  b: {self.b.label()}\n  order: {abplan.ORDER_RULE}")
                self._floor()
                self._pairs()
            self.interrupted = False
        finally:
            launch.discard_ahead()
            self.save()
            self.store.unlock()
            self.guard.release()
        return self.comparison()

    def _run(self, case: Case, side: str, then: tuple[Case, str] | None) -> dict:
        s = self.side(side)
        nxt = self.side(then[1]) if then else None
        ahead = then is not None and s.starts_ahead and nxt.starts_ahead
        r = records.run_case(case, guard=self.guard, root=s.root, env=s.env, then=then[0] if ahead else None,
                             then_root=nxt.root if ahead else None, then_env=nxt.env if ahead else None)
        m = r.get("metrics") or {}
        self.processes.append({"case_id": case.case_id, "side": side, "status": r["status"],
                               "reason": r.get("reason", ""), "images_per_s": m.get("images_per_s"),
                               "wall_s": r.get("wall_s"), "phases_s": records.phases_of(r),
                               "worker_root": ((r.get("ranks") or [{}])[0]).get("worker_root"),
                               **({"gpu_shared": r["gpu_shared"]} if r.get("gpu_shared") else {})})
        self.save()
        return r

    def _floor(self) -> None:
        n = self.settings.floor_processes
        device = "cuda" if any(s.case.device == "cuda" for s in self.states) else "cpu"
        reference = recipes.noise_reference(device)
        if n < 2:
            return
        self.say(f"noise floor: {reference.case_id} in {n} fresh processes of a")
        figures = []
        for i in range(n):
            then = (reference, "a") if i + 1 < n else (self.states[0].case, "a")
            r = self._run(reference, "a", then)
            if r["status"] != "ok":
                self.say(f"  not measured ({r['status']}: {r['reason']}); pairs are judged by their own spread")
                return
            figures.append(r["metrics"]["images_per_s"])
        self.floor = {**stats.noise_floor(figures), "case_id": reference.case_id}
        self.say(f"  {', '.join(f'{x:,.1f}' for x in figures)} images/s, process-to-process sd "
                 f"{100 * self.floor['rel_sd']:.2f}%")

    def _round_s(self) -> float:
        """Expected seconds of one round (every case once on each side): this machine's stored times for
        the recipes, else this run's own processes so far."""
        stored = query.load([self.store.root / self.machine])[0] if (self.store.root / self.machine).is_dir() else []
        times = plan.per_process_times(stored)
        walls = [p["wall_s"] for p in self.processes if p.get("wall_s")]
        fallback = statistics.median(walls) if walls else 0.0
        return sum(2 * (plan.expected_s(s.case, times) or fallback) for s in self.states)

    def _pairs(self) -> None:
        st = self.settings
        left = st.budget_s - (time.monotonic() - self.t0)
        self.plan = abplan.plan_pairs(self.floor, st.threshold_pct, left, self._round_s(), st.pairs)
        self.say(self.plan.message)
        done = 0
        self.round_s = self._round_s()
        while self._wanted(done):
            began = time.monotonic()
            active = [i for i, s in enumerate(self.states) if not s.failed]
            order = abplan.interleaving(len(active), done, 1)
            for j, (p, ci, side) in enumerate(order):
                state = self.states[active[ci]]
                if state.failed:
                    continue
                nxt = order[j + 1] if j + 1 < len(order) else None
                then = (self.states[active[nxt[1]]].case, nxt[2]) if nxt else (state.case, side)
                r = self._run(state.case, side, then)
                state.shared += r.get("gpu_shared") or []
                if r["status"] == "ok":
                    state.figures[side].append(r["metrics"]["images_per_s"])
                    shown = f"{r['metrics']['images_per_s']:,.1f} images/s"
                else:
                    state.failed[side] = f"{r['status']}: {r['reason']}"
                    shown = f"{r['status']}: {r['reason']}"
                self.say(f"[pair {p + 1}] {side} {state.case.case_id}: {shown}, {r.get('wall_s', 0):.0f} s "
                         f"(elapsed {duration(time.monotonic() - self.t0)})")
            done += 1
            self.round_s = time.monotonic() - began

    def _wanted(self, done: int) -> bool:
        """Another round: the planned pairs first; after them, while a case is still undecided
        (analysis/ab.undecided), another round fits in the budget and no --pairs was given."""
        live = [s for s in self.states if not s.failed]
        if not live:
            return False
        if done < self.plan.pairs:
            return True
        if self.settings.pairs or done >= abplan.paired.MAX_PAIRS:
            return False
        rows = [self._row(s) for s in live if not s.shared]  # more pairs beside another's work decide nothing
        elapsed = time.monotonic() - self.t0
        return any(abplan.undecided(r, self.settings.threshold_pct) for r in rows) and \
            elapsed + self.round_s <= self.settings.budget_s

    def closing_lines(self) -> list[str]:
        """How long it took, the pairs each case got, and where the processes' time went."""
        floor_n = self.floor["n"] if self.floor else 0
        counts = {s.case.case_id: min(len(s.figures["a"]), len(s.figures["b"])) for s in self.states}
        pairs = (f"{next(iter(counts.values()))} pair(s) for each case" if len(set(counts.values())) == 1 else
                 "pairs: " + ", ".join(f"{k} {n}" for k, n in counts.items()))
        spent = phases.total([p["phases_s"] for p in self.processes if p.get("phases_s")])
        took = (f"took {duration(time.monotonic() - self.t0)}: {len(self.processes)} processes ({floor_n} of them the "
                f"noise floor), {pairs}")
        return [took, f"where the time went: {phases.summary_text(spent, len(self.processes))}"]

    # --- what it found ----------------------------------------------------------------------------
    def _row(self, s: CaseState) -> dict:
        floor = self.floor if s.case.loader == "synthetic" else None  # the floor is a synthetic case's noise
        row = abplan.row(s.case.case_id, s.sweep, s.figures["a"], s.figures["b"], floor, s.failed or None)
        v = comparemod.verdicts
        if s.shared and row["verdict"] in (v.FASTER, v.SLOWER, v.WITHIN, v.INCONCLUSIVE):
            # pairs measured beside someone else's work: their differences are not this machine's noise
            row.update(verdict=comparemod.verdicts.SHARED, note=sharing.summary(s.shared, 1))
        return row

    def comparison(self) -> comparemod.Comparison:
        rows = [self._row(s) for s in self.states]
        bad = [r for r in rows if (r["verdict"] == comparemod.verdicts.SLOWER
                                   and -r["delta_pct"] > self.settings.fail_under_pct)
               or r["verdict"] == comparemod.FAILED_IN_B]
        return comparemod.Comparison(rows, kind(self.a, self.b), self._side_doc(self.a), self._side_doc(self.b),
                                     self.settings.fail_under_pct, False, bad,
                                     method="by the paired differences of interleaved fresh processes"
                                            + (", pooled with the run's noise floor" if self.floor else "") + " (95%)")

    def _side_doc(self, s: Side) -> dict:
        return {"label": s.label(), "ref": s.ref, "commit": s.commit, "dirty": s.dirty, "env": s.env,
                "machines": [self.machine], "worktree": s.worktree}

    def save(self) -> None:
        c = self.comparison()
        doc = comparemod.to_json(c)
        doc["ab"] = {"run_id": self.run_id, "machine": self.machine, "elapsed_s": time.monotonic() - self.t0, "interrupted": self.interrupted,
                     "threshold_pct": self.settings.threshold_pct, "budget_s": self.settings.budget_s,
                     "plan": self.plan.__dict__ if self.plan else None, "order_rule": abplan.ORDER_RULE,
                     "noise_floor": self.floor, "processes": self.processes, "env": self.env,
                     "shared_gpu": self.settings.shared_gpu, "gpu_shared_before_run": self.shared_before,
                     "cases": [{"case_id": s.case.case_id, "case": s.case.to_dict(), "sweep": s.sweep,
                                "a_images_per_s": s.figures["a"], "b_images_per_s": s.figures["b"],
                                "failed": s.failed} for s in self.states]}
        write_json_atomic(self.path, doc, indent=1)

