"""pytest-benchmark front end: `pytest --benchmark-only` runs the suite's sweeps as parametrized
benchmark tests. Each case runs in its own fresh processes as in a sweep; what pytest-benchmark
stores and compares is built from the measured windows, one value per window: seconds per image
(the slowest rank's window over every rank's images). So its mean is the inverse of throughput,
its OPS column is images/s, and `--benchmark-compare-fail=mean:5%` fails on a throughput
regression of about 5%, never on start-up, compilation or warm-up time.

BENCH_SWEEPS (comma-separated sweep names; default: the `make bench` set where a GPU is visible,
`smoke` where none is), BENCH_MAX_GPUS (GPU counts to plan for, default 4: larger cases are skipped
with the reason), BENCH_MODEL (the model every case trains instead of its recipe's: a torchvision
classification model or package.module:factory), BENCH_RESULTS (results root), BENCH_PROCESSES (fresh
processes per case, default 1)
BENCH_FLOOR_PROCESSES (processes of the noise-floor reference at the session's start, default 0)
and BENCH_SHARED_GPU (1: measure beside other work on the GPUs, every figure marked shared; by default
the session stops with exit 2 when another process holds them) steer it. A plain `pytest` skips these tests.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .core import identity, models, recipes, stats, sweeps
from .core.errors import BenchError
from .data.defaults import default_data_dir, ensure_default_data
from .data.folder import check_size, scan
from .harness import env as envmod
from .harness.records import assemble, machine_peak, measure
from .harness.run import Run, now_iso
from .store.tree import DEFAULT_ROOT, Store


def planned_cases() -> list[tuple[str, object]]:
    visible = envmod.visible_gpu_count()
    device = "cuda" if visible else "cpu"
    names = os.environ.get("BENCH_SWEEPS") or ",".join(sweeps.DEFAULT_GPU_SWEEPS if visible else ("smoke",))
    max_gpus = int(os.environ.get("BENCH_MAX_GPUS", "4")) if visible else 2
    data_dir = os.environ.get("BENCH_DATA", "")
    model = models.model_fields(os.environ["BENCH_MODEL"]) if os.environ.get("BENCH_MODEL") else {}
    planned = []
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        needs = name in sweeps.NEEDS_DATA
        overrides = {**({"data_dir": data_dir or str(default_data_dir())} if needs else {}), **model}
        # sweeps that run everything at their largest GPU count get what is here; the others
        # also plan counts beyond it, which are then skipped with the reason
        n = min(max_gpus, visible) if name in sweeps.AT_LARGEST_COUNT else max_gpus
        planned += [(name, c) for c in sweeps.build(name, n, device, **overrides)]
    return planned


def pytest_generate_tests(metafunc):
    """Each planned case a test, its parameter the case id (a string pytest-benchmark stores as is)."""
    if "bench_case" in metafunc.fixturenames:
        planned = planned_cases()
        _PLANNED.update((c.case_id, c) for _, c in planned)
        metafunc.parametrize("bench_sweep,bench_case", [(s, c.case_id) for s, c in planned],
                             ids=[f"{s}:{c.case_id.rsplit('-', 1)[0]}" for s, c in planned])


_PLANNED: dict = {}
"""Case id -> the case it names, for the tests generated in this session."""


def case_of(case_id: str):
    """The planned case a test's parameter names."""
    return _PLANNED[case_id]


@pytest.fixture(scope="session")
def bench_session(request):
    """What every benchmark test shares: the environment once, the store, one-GPU figures."""
    if not request.config.getoption("benchmark_only", False):
        pytest.skip("the benchmark sweep runs with `pytest --benchmark-only`")
    store = Store(os.environ.get("BENCH_RESULTS", DEFAULT_ROOT))
    run = Run(store, processes=int(os.environ.get("BENCH_PROCESSES", "1")),
              shared_gpu=os.environ.get(SHARED_GPU_VAR, "0") == "1")
    run.manifest["sweeps"].append("pytest-benchmark")
    try:
        run.claim([c for _, c in planned_cases()])  # another job on the GPUs, or a sweep here, would slow both
    except BenchError as e:
        pytest.exit(f"error: {e}", returncode=2)
    visible = envmod.visible_gpu_count()
    device = "cuda" if visible else "cpu"
    run.measure_floor(recipes.noise_reference(device), int(os.environ.get("BENCH_FLOOR_PROCESSES", "0")))
    peak = machine_peak(store, run.env, device)
    yield {"env": run.env, "run": run, "store": store, "peak": peak, "one_gpu": {}, "visible": visible,
           "data_ready": set()}
    run.finish()


def _ensure_data(case, session) -> None:
    if case.loader == "synthetic" or case.data_dir in session["data_ready"]:
        return
    if not os.environ.get("BENCH_DATA"):
        ensure_default_data(Path(case.data_dir), sweeps.images_needed([c for _, c in planned_cases()]))
    try:
        check_size(scan(case.data_dir), case)
    except BenchError as e:
        pytest.fail(str(e))
    session["data_ready"].add(case.data_dir)


def seconds_per_image(record: dict) -> list[float]:
    """One value per measured window of every process: the inverse of that window's images/s."""
    return [1.0 / ips for p in record.get("processes") or [] for ips in (p.get("images_per_s_repeats") or [])]


SHARED_GPU_VAR = "BENCH_SHARED_GPU"
TESTED_WITH = "pytest-benchmark 5.3 (pinned in pyproject.toml)"


def feed_benchmark(benchmark, values: list[float]) -> None:
    """Give pytest-benchmark the windows' seconds per image as its rounds (in place of timing a call).
    Its public API only times calls it makes itself, so this uses two of its internals, checked here
    against the version tested."""
    if not hasattr(benchmark, "_make_stats"):
        pytest.fail(f"this pytest-benchmark has no _make_stats; the front end is tested with {TESTED_WITH}")
    benchmark._mode = "windows of the suite's own measured loop"  # the fixture counts as used once
    stats = benchmark._make_stats(1)
    for v in values:
        stats.update(v)


def run_benchmark(benchmark, bench_sweep, bench_case, bench_session) -> dict:
    case = case_of(bench_case) if isinstance(bench_case, str) else bench_case
    if case.device == "cuda" and case.gpus > bench_session["visible"]:
        pytest.skip(f"needs {case.gpus} GPU(s); {bench_session['visible']} visible")
    _ensure_data(case, bench_session)
    started = now_iso()
    run = bench_session["run"]
    try:
        out = measure(case, run.processes, run.floor, guard=run.guard)
    except BenchError as e:  # someone else's work came onto the GPUs: no later figure would be the machine's
        pytest.exit(f"error: {e}", returncode=2)
    record = assemble(case, out, bench_sweep, bench_session["env"], started, bench_session["peak"], run.run_id)
    bench_session["store"].save(record)
    benchmark.group = f"{bench_sweep}: OPS = images/s (values: seconds per image, one per measured window)"
    if record["status"] == "ok":
        feed_benchmark(benchmark, seconds_per_image(record))
    m = record["metrics"]
    info = {"status": record["status"], "reason": record["reason"], "case_id": case.case_id,
            "case": case.to_dict(), "sweep": bench_sweep, "run_id": record["run_id"], "metrics": m}
    if record["status"] == "ok":
        key = identity.knobs_key(case, ignore={"gpus"})  # the same case on one GPU
        if case.gpus == 1:
            bench_session["one_gpu"][key] = m["images_per_s"]
        one = bench_session["one_gpu"].get(key)
        info.update(verdict=record["diagnosis"].get("verdict"), mfu_pct=record["diagnosis"].get("mfu_pct"),
                    images_per_s=m["images_per_s"], images_per_s_per_gpu=m["images_per_s_per_gpu"],
                    images_per_s_ci95=m.get("images_per_s_ci95"), spread_pct=m["spread_pct"],
                    data_wait_pct=m["data_wait_pct"], input_stall_pct=m.get("input_stall_pct"),
                    scaling_efficiency_pct=stats.scaling_efficiency(m["images_per_s"], case.gpus, one) if one else None)
    benchmark.extra_info.update(info)
    if record["status"] == "skipped":
        pytest.skip(record["reason"])
    assert record["status"] == "ok", f"{record['status']}: {record['reason']}"
    return record


def pytest_benchmark_update_machine_info(config, machine_info):
    """GPU facts from NVML and library versions, with no CUDA context in the pytest process."""
    gpu = envmod.gpu_info()
    soft = envmod.software_versions()
    machine_info.update({"gpu_model": gpu.get("gpu_model"), "gpu_count": gpu.get("gpu_count"),
                         "driver": gpu.get("driver"), "cuda": soft["cuda"], "nccl": soft["nccl"],
                         "cudnn": soft["cudnn"], "torch": soft["torch"], "torchvision": soft["torchvision"],
                         "dali": soft["dali"]})


def pytest_benchmark_update_commit_info(config, commit_info):
    """The commit the suite's own results name (BENCH_COMMIT where set), so both stores agree."""
    if os.environ.get("BENCH_COMMIT"):
        info = envmod.git_info()
        commit_info.update(id=info["commit"], dirty=info["dirty"])
