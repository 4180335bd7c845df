"""Trust on a shared machine: another process on the GPU refuses the run or, with --shared-gpu, marks
every figure it touched, and such figures are never judged. NVML is stood in for by a fake that
reports what a test puts on its GPUs; the case's processes by the launcher's stand-in."""
import io
import os
import sys
from types import SimpleNamespace

import pytest

from bench.core import phrases, sharing, verdicts
from bench.core.case import Case
from bench.core.errors import BenchError
from bench.harness import gpu_guard, launch
from bench.harness.gpu_guard import GpuBusy, GpuGuard
from tests.stored import ok_process

GIB = 2 ** 30


class FakeNvml:
    """NVML as pynvml offers it, for GPUs whose processes, memory in use and utilisation a test sets."""
    nvmlMemory_v2 = 2

    def __init__(self, gpus: int = 1, procs=(), used: int = 0, util: float = 0.0, v2: bool = True):
        self.gpus, self.procs, self.used, self.util, self.v2 = gpus, list(procs), used, util, v2

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H100 80GB HBM3"

    def nvmlSystemGetDriverVersion(self):
        return "580.00"

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        if version is not None and not self.v2:
            raise RuntimeError("NVML without the v2 call")
        reserve = 0 if version else 480 * 2 ** 20  # v1 counts the driver's reserve as used
        return SimpleNamespace(total=80 * GIB, used=self.used + reserve, free=80 * GIB - self.used - reserve)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in self.procs]

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self.util)


def cuda_case(name="c", **kw):
    return Case(name=name, model="resnet18", num_classes=10, image_size=32, batch_size=2, **kw)


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(gpu_guard, "IDLE_INTERVAL_S", 0.0)
    monkeypatch.setattr(gpu_guard, "SETTLE_S", 0.05)


def test_an_idle_gpu_is_the_runs_and_any_sign_of_another_is_named_in_one_line():
    assert GpuGuard(nvml=FakeNvml()).before_run([cuda_case()]) == []
    assert GpuGuard(nvml=FakeNvml(v2=False)).before_run([cuda_case()]) == []  # v1: the reserve is no process
    assert GpuGuard(nvml=FakeNvml()).before_run([Case(device="cpu")]) == []  # a CPU run watches no GPU
    cases = {
        "process": (FakeNvml(procs=[(4242, 3 * GIB)], used=3 * GIB), ["GPU 0: pid 4242 (3.0 GiB), 3.0 GiB in use"]),
        "memory only": (FakeNvml(used=2 * GIB), ["GPU 0: 2.0 GiB in use"]),  # another container's, pid hidden
        "busy only": (FakeNvml(util=97.0), ["utilisation 97%"]),
        "v1 memory": (FakeNvml(used=GIB, v2=False), ["GPU 0: 1.5 GiB in use"]),  # a context over the reserve
    }
    for what, (nvml, words) in cases.items():
        with pytest.raises(GpuBusy) as e:
            GpuGuard(nvml=nvml).before_run([cuda_case()])
        text = str(e.value)
        assert "\n" not in text and "--shared-gpu" in text and "before the run" in text, what
        assert all(w in text for w in words), (what, text)
        assert e.value.exit_code == 2
    # accepted: the same look is returned to be stored, not raised
    seen = GpuGuard(shared=True, nvml=FakeNvml(procs=[(4242, GIB)], used=GIB)).before_run([cuda_case()])
    assert [s["processes"][0]["pid"] for s in seen] == [4242] and seen[0]["when"] == "before the run"


def test_another_process_is_named_by_what_it_runs(tmp_path):
    proc = tmp_path / "4242"
    proc.mkdir()
    (proc / "cmdline").write_bytes(b"python3\0train.py\0--lr\0\x1b[31m0.1\0")
    assert gpu_guard.command_of(4242, tmp_path) == "python3 train.py --lr ?[31m0.1"  # no escape reaches a terminal
    assert gpu_guard.command_of(99999, tmp_path) == ""


def fake_nvml_module(monkeypatch, nvml: FakeNvml):
    """The fake as the pynvml module every reader imports: this machine shows its GPUs."""
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("BENCH_SKIP_PEAK", "1")
    monkeypatch.setenv("BENCH_PRIME", "0")


@pytest.mark.parametrize("command", [
    ["run", "--model", "resnet18", "--image-size", "32", "--batch-size", "2"],
    ["sweep", "amp", "--model", "resnet18"],
])
@pytest.mark.parametrize("seen", ["process", "memory only"])
def test_run_and_sweep_refuse_a_gpu_another_process_holds_before_any_work(command, seen, tmp_path, capsys,
                                                                           monkeypatch):
    from bench.cli.main import main
    nvml = FakeNvml(procs=[(4242, 3 * GIB)], used=3 * GIB) if seen == "process" else FakeNvml(used=2 * GIB)
    fake_nvml_module(monkeypatch, nvml)
    started = []
    monkeypatch.setattr(launch, "run_case", lambda *a, **k: started.append(a) or ok_process(1.0, 1.0, 2))
    monkeypatch.setattr(launch, "start_ahead", lambda *a, **k: started.append(a))
    assert main(command + ["--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the GPUs are not this run's alone: GPU 0: ")
    assert ("pid 4242" in err[0]) == (seen == "process") and "--shared-gpu" in err[0]
    assert not started and not any(tmp_path.rglob("*.json"))  # nothing ran, nothing stored


def test_shared_gpu_runs_and_marks_every_record_and_the_report(tmp_path, capsys, monkeypatch):
    from bench.cli.main import main
    from bench.store import query
    fake_nvml_module(monkeypatch, FakeNvml(procs=[(4242, 3 * GIB)], used=3 * GIB))
    monkeypatch.setattr(launch, "run_case", lambda *a, **k: ok_process(1000.0, 1.0, 2))
    assert main(["run", "--model", "resnet18", "--image-size", "32", "--batch-size", "2", "--shared-gpu",
                 "--processes", "2", "--results", str(tmp_path)]) == 0
    recs, _ = query.load([tmp_path])
    assert len(recs) == 1
    r = recs[0]
    assert r.shared_label == "GPU shared"
    assert [(s["process"], s["when"]) for s in r.gpu_shared] == [
        (1, "before the case"), (1, "after the case"), (2, "before the case"), (2, "after the case")]
    assert all(s["processes"][0]["pid"] == 4242 for s in r.gpu_shared)
    manifest = next(tmp_path.rglob("runs/*.json")).read_text()
    assert '"shared_gpu": true' in manifest and "gpu_shared_before_run" in manifest
    capsys.readouterr()
    assert main(["report", str(tmp_path), "--all", "--no-files"]) == 0
    out = capsys.readouterr().out
    assert "1,000.0 (GPU shared)" in out
    assert "GPU shared: GPU 0: pid 4242 (3.0 GiB), 3.0 GiB in use (before the case" in out


def test_a_process_seen_during_one_case_marks_that_case_alone(tmp_path, monkeypatch):
    """The case's own sampler saw a process that is none of its ranks during its windows: that record
    says so; the cases before and after it, with the GPU clear around them, say nothing."""
    from bench.harness.run import Run, run_cases
    from bench.store import query
    from bench.store.tree import Store
    fake_nvml_module(monkeypatch, FakeNvml())
    cases = [cuda_case(name) for name in ("one", "two", "three")]

    def fake_run(case, dist=None, **_):
        out = ok_process(1000.0, 1.0, 2)
        util = {"gpu_util_pct": {"mean": 99.0, "min": 98.0, "max": 100.0}}
        samples = {"compute_pids": {"111": GIB}, "memory_rise_bytes": 0, **util}
        if case.name == "two":
            samples = {"compute_pids": {"111": GIB, "4242": 2 * GIB}, "memory_rise_bytes": 2 * GIB,
                       "memory_used_bytes": {"max": 3 * GIB}, **util}
        out["ranks"] = [{"rank": 0, "pid": 111, "gpu_samples": {"cuda:0": samples}}]
        return out
    monkeypatch.setattr(launch, "run_case", fake_run)
    with Run(Store(tmp_path), out=io.StringIO()) as run:
        run_cases(run, cases, "s")
    by_name = {r.case["name"]: r for r in query.load([tmp_path])[0]}
    assert [n for n, r in sorted(by_name.items()) if r.gpu_shared] == ["two"]
    seen = by_name["two"].gpu_shared[0]
    assert seen["when"] == "during the windows" and seen["processes"] == [{"pid": 4242, "memory_bytes": 2 * GIB}]
    assert "pid 4242 (2.0 GiB)" in sharing.text(seen) and "2.0 GiB more than the case allocated" in sharing.text(seen)


def test_a_process_that_stays_after_a_case_stops_the_run_before_the_next(tmp_path, monkeypatch):
    """Without --shared-gpu: the case it was found after is stored and marked, the run stops before the
    next process with exit 2, and what ran is kept."""
    from bench.harness.run import Run, run_cases
    from bench.store import query
    from bench.store.tree import Store
    nvml = FakeNvml()
    fake_nvml_module(monkeypatch, nvml)
    ran = []

    def fake_run(case, dist=None, **_):
        ran.append(case.name)
        if case.name == "two":  # a colleague's job starts while case two runs, and stays
            nvml.procs, nvml.used = [(4242, 5 * GIB)], 5 * GIB
        return ok_process(1000.0, 1.0, 2)
    monkeypatch.setattr(launch, "run_case", fake_run)
    with pytest.raises(GpuBusy, match=r"pid 4242 .*before the case.*the run stopped before its next process"):
        with Run(Store(tmp_path), out=io.StringIO()) as run:
            run_cases(run, [cuda_case(n) for n in ("one", "two", "three")], "s")
    assert ran == ["one", "two"]
    by_name = {r.case["name"]: r for r in query.load([tmp_path])[0]}
    assert set(by_name) == {"one", "two"} and not by_name["one"].gpu_shared
    assert [s["when"] for s in by_name["two"].gpu_shared] == ["after the case"]


def test_the_samplers_note_what_is_not_the_cases():
    from bench.worker.gpu_sampler import GpuSampler

    class Sampled(FakeNvml):
        NVML_CLOCK_SM = 1

        def nvmlDeviceGetClockInfo(self, h, kind):
            return 1980

        def nvmlDeviceGetPowerUsage(self, h):
            return 500_000
    nvml = Sampled(procs=[(111, GIB)], used=GIB)
    reserved = {"cuda:0": 0.6 * GIB}
    s = GpuSampler({"cuda:0": 0}, interval_s=0.0, nvml=nvml, reserved=lambda name: reserved[name])
    for step in range(10):
        if step == 5:  # another process comes with 2 GiB the case's allocator does not hold
            nvml.procs, nvml.used = [(111, GIB), (4242, 2 * GIB)], 3 * GIB
        s._run_once()
    summary = s.summary()["cuda:0"]
    assert summary["compute_pids"] == {"111": GIB, "4242": 2 * GIB}
    assert summary["memory_rise_bytes"] == 2 * GIB
    ranks = [{"rank": 0, "pid": 111, "gpu_samples": {"cuda:0": summary}}]
    [seen] = sharing.during_windows(ranks, "t")
    assert seen["processes"] == [{"pid": 4242, "memory_bytes": 2 * GIB}] and seen["memory_rise_bytes"] == 2 * GIB
    # NVML's process ids from another namespace (none is the case's): one process per device is the case's own
    alone = [{"rank": 0, "pid": 7, "gpu_samples": {"cuda:0": {"compute_pids": {"90001": GIB}, "memory_rise_bytes": 0}}}]
    assert sharing.during_windows(alone, "t") == []
    two = [{"rank": 0, "pid": 7, "gpu_samples": {"cuda:0": {"compute_pids": {"90001": GIB, "90002": GIB}}}}]
    assert [p["pid"] for p in sharing.during_windows(two, "t")[0]["processes"]] == [90001, 90002]


def test_compare_ab_and_claims_leave_a_shared_figure_unjudged():
    from bench.analysis import claims, compare
    from bench.store import query
    from tests.stored import fixture_dicts
    dicts = fixture_dicts()
    seen = [sharing.sighting(0, "during the windows", "2026-12-06T10:00:00+00:00", [{"pid": 4242}], GIB)]
    shared = [dict(d, gpu_shared=seen) for d in dicts]
    a, b = [query.wrap(d) for d in dicts], [query.wrap(d) for d in shared]
    rows = compare.compare(a, a + [], force=True)
    assert any(r["verdict"] == verdicts.WITHIN for r in rows)
    with pytest.raises(BenchError, match="nothing could be judged"):
        compare.compare(a, b, force=True)
    row = compare._row(a[0], b[0], {}, False) if a[0].ok else None
    if row:
        assert row["verdict"] == verdicts.SHARED and "GPU shared in b: GPU 0: pid 4242" in row["note"]
    judged = dict((c.id, e["verdict"]) for c, e in claims.evaluations(b))
    plain = dict((c.id, e["verdict"]) for c, e in claims.evaluations(a))
    for claim, verdict in plain.items():
        if verdict not in (verdicts.CANNOT,) and claim != "accumulation-fewer-allreduces":
            assert judged[claim] == verdicts.SHARED, claim  # an all-reduce count needs no noise and stands


def test_a_pair_of_a_claim_experiment_measured_beside_another_process_is_inconclusive():
    from bench.analysis import answers
    from bench.analysis import experiments as ex
    from bench.harness import experiments as hx
    before = Case(device="cpu", name="amp-fp32", precision="fp32")
    after = before.replace(name="amp-fp16", precision="fp16")
    e = next(e for e in ex.find([before, after]) if e.claim.id == "amp")
    en = hx.entry(e, {before.case_id: "amp", after.case_id: "amp"})
    seen = [sharing.sighting(0, "before the case", "2026-12-06T10:00:00+00:00", [{"pid": 4242}], GIB)]
    runs = {before.case_id: [ok_process(100.0, 1.0, 2)], after.case_id: [{**ok_process(150.0, 1.0, 2),
                                                                          "gpu_shared": seen}]}
    hx._add_pair(e, en, runs, {})
    assert en["status"] == "GPU shared" and en["verdict"] == verdicts.SHARED and "pid 4242" in en["reason"]
    ev = answers.from_experiment({"run_id": "r", "commit_folder": "c"}, en)
    assert ev.verdict == "inconclusive (GPU shared)" and ev.effect == "-" and "pid 4242" in phrases.render(ev.detail)


def test_host_load_outside_the_run_is_the_hosts_busy_time_less_the_ranks_own():
    ranks = [{"host_cpu_ticks": {"host": "h", "busy": 900, "total": 1600}, "own_cpu_ticks": 500},
             {"host_cpu_ticks": {"host": "h", "busy": 905, "total": 1600}, "own_cpu_ticks": 100}]
    assert sharing.host_outside_pct(ranks) == pytest.approx(100 * 300 / 1600)
    assert sharing.host_outside_pct([{"host_cpu_ticks": {"host": "h", "busy": 1, "total": 10}}]) is None
    assert sharing.host_outside_pct([]) is None


def test_own_ticks_count_the_children_a_process_started():
    import os
    import subprocess
    from bench.worker import host_cpu
    before = host_cpu.own_ticks()
    # a child that has used half a second of CPU, however busy the machine, and is still running
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 0.5: pass\n"
                              "print(flush=True)\ntime.sleep(60)"], stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        during = host_cpu.own_ticks()
    finally:
        child.kill()
        child.wait()
    ticks = os.sysconf("SC_CLK_TCK")
    assert during - before >= 0.4 * ticks  # the live child's busy half second is the run's own


@pytest.mark.alone
@pytest.mark.slow
def test_a_real_loaders_figure_is_marked_when_the_host_was_busy_outside_the_run(jpegs):
    """A torch DataLoader case on the CPU, once with a busy loop beside it: the record's share of the cores
    busy outside the run rises past the mark, and every table says so."""
    import subprocess
    from bench.harness import records
    from bench.present import cases as cases_table
    from bench.store import query
    case = Case(device="cpu", loader="torch", loader_only=True, num_workers=1, batch_size=4, image_size=32,
                steps=2, repeats=2, warmup_steps=1, min_window_s=0.5, data_dir=str(jpegs))

    def measured(beside: bool) -> dict:
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if beside else None
        try:
            result = records.measure(case, 1, None)
        finally:
            if hog:
                hog.kill()
                hog.wait()
        assert result["status"] == "ok", result.get("reason")
        return records.assemble(case, result, "s", {"gpu_count": 0, "cpu_cores": 2, "commit": "c" * 40},
                                "2026-12-06T10:00:00+00:00",
                                {}, "20261206T100000Z-aaaa")
    quiet, busy = measured(False), measured(True)
    outside = busy["metrics"]["host_cpu_outside_pct"]
    assert outside > sharing.HOST_OUTSIDE_PCT and outside > quiet["metrics"]["host_cpu_outside_pct"]
    assert busy["processes"][0]["host_cpu_outside_pct"] == outside
    r = query.wrap(busy)
    assert r.shared_label == "host shared" and not r.gpu_shared  # shown, and still judged: no GPU was shared
    text, notes = cases_table.cases_table([r], "en")
    assert "(host shared)" in text and any(f"host shared: {outside:.0f}% of its cores busy outside the run" in n
                                           for n in notes)


def test_an_ab_case_measured_beside_another_process_is_not_judged():
    """ab's pairs of a case any of whose processes met another's work decide nothing: the case says
    `inconclusive (GPU shared)` with what was seen, and no more pairs are asked for it."""
    from bench.harness.ab import AbRun, CaseState
    run = AbRun.__new__(AbRun)
    run.floor = None
    clear = CaseState(cuda_case("clear"), "s", figures={"a": [100.0, 101.0, 99.0], "b": [110.0, 111.0, 109.0]})
    shared = CaseState(cuda_case("shared"), "s", figures={"a": [100.0, 101.0, 99.0], "b": [110.0, 111.0, 109.0]},
                       shared=[sharing.sighting(0, "during the windows", "t", [{"pid": 4242}], GIB)])
    assert run._row(clear)["verdict"] == verdicts.FASTER
    row = run._row(shared)
    assert row["verdict"] == verdicts.SHARED and row["note"].startswith("GPU 0: pid 4242")
    failed = CaseState(cuda_case("failed"), "s", failed={"b": "oom: out of memory"}, shared=shared.shared)
    assert run._row(failed)["verdict"] == "failed in b"  # a failure is still one


def test_a_second_run_is_refused_between_the_first_runs_processes(tmp_path, monkeypatch):
    """The first run registers itself on its GPUs while it runs; a second, started while the GPU is free
    between two of the first's processes (NVML sees nothing), is refused all the same, naming the first.
    An entry whose process ended, or whose pid another process now holds, or of another GPU, stops nothing."""
    import json
    import subprocess
    from bench.harness import run_registry
    monkeypatch.setenv("BENCH_RUN_REGISTRY", str(tmp_path / "runs"))
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "runs").mkdir()
        entry = {"pid": first.pid, "start_ticks": run_registry.start_ticks(first.pid), "run_id": "20261206T165109Z-672e",
                 "gpus": ["0"], "checkout": "/tmp/w1"}
        (tmp_path / "runs" / f"{first.pid}.json").write_text(json.dumps(entry))
        with pytest.raises(GpuBusy) as e:
            GpuGuard(nvml=FakeNvml()).before_run([cuda_case()], "20261206T165149Z-6ecb")
        assert f"GPU 0: pid {first.pid} (run 20261206T165109Z-672e of this suite, in /tmp/w1)" in str(e.value)
        assert "\n" not in str(e.value)
        (tmp_path / "runs" / f"{first.pid}.json").write_text(json.dumps({**entry, "start_ticks": 1}))  # pid reused
        assert GpuGuard(nvml=FakeNvml(gpus=2)).before_run([cuda_case()]) == []
        (tmp_path / "runs" / f"{first.pid}.json").write_text(json.dumps({**entry, "gpus": ["1"]}))
        guard = GpuGuard(nvml=FakeNvml(gpus=2))
        assert guard.before_run([cuda_case()], "r2") == []  # the first uses GPU 1, this run GPU 0
        mine = json.loads((tmp_path / "runs" / f"{os.getpid()}.json").read_text())
        assert mine["run_id"] == "r2" and mine["gpus"] == ["0"]
        guard.release()
        assert not (tmp_path / "runs" / f"{os.getpid()}.json").exists()
    finally:
        first.kill()
        first.wait()
    (tmp_path / "runs" / f"{first.pid}.json").write_text(json.dumps(entry))  # its process has ended
    assert GpuGuard(nvml=FakeNvml()).before_run([cuda_case()]) == []


def test_a_run_registers_while_it_runs_and_not_after(tmp_path, monkeypatch):
    from bench.harness.run import Run, run_cases
    from bench.store.tree import Store
    fake_nvml_module(monkeypatch, FakeNvml())
    monkeypatch.setenv("BENCH_RUN_REGISTRY", str(tmp_path / "runs"))
    seen = []
    monkeypatch.setattr(launch, "run_case", lambda *a, **k: seen.append(sorted((tmp_path / "runs").glob("*.json")))
                        or ok_process(1000.0, 1.0, 2))
    with Run(Store(tmp_path / "results"), out=io.StringIO()) as run:
        run_cases(run, [cuda_case()], "s")
    assert [p.name for p in seen[0]] == [f"{os.getpid()}.json"] and not list((tmp_path / "runs").glob("*.json"))
