"""pytest-benchmark front end: `pytest --benchmark-only` runs the suite's sweeps as parametrized
benchmark tests, one pedantic round around each case's own measured run.

BENCH_SWEEPS (comma-separated sweep names; default: the `make bench` set where a GPU is visible,
`smoke` where none is), BENCH_MAX_GPUS (GPU counts to plan for, default 4: larger cases are skipped
with the reason) and BENCH_RESULTS (results root) steer it. A plain `pytest` skips these tests.
"""
from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from . import env as envmod
from . import results, stats, sweeps


def planned_cases() -> list[tuple[str, object]]:
    visible = envmod.visible_gpu_count()
    device = "cuda" if visible else "cpu"
    names = os.environ.get("BENCH_SWEEPS") or ",".join(sweeps.DEFAULT_GPU_SWEEPS if visible else ("smoke",))
    max_gpus = int(os.environ.get("BENCH_MAX_GPUS", "4")) if visible else 2
    data_dir = os.environ.get("BENCH_DATA", "")
    from .cli import default_data_dir
    planned = []
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        needs = name in sweeps.NEEDS_DATA
        overrides = {"data_dir": data_dir or str(default_data_dir())} if needs else {}
        # sweeps that run everything at their largest GPU count get what is here; the others
        # also plan counts beyond it, which are then skipped with the reason
        n = min(max_gpus, visible) if name in sweeps.AT_LARGEST_COUNT else max_gpus
        planned += [(name, c) for c in sweeps.build(name, n, device, **overrides)]
    return planned


def pytest_generate_tests(metafunc):
    if "bench_case" in metafunc.fixturenames:
        planned = planned_cases()
        metafunc.parametrize("bench_sweep,bench_case", planned,
                             ids=[f"{s}:{c.case_id.rsplit('-', 1)[0]}" for s, c in planned])


@pytest.fixture(scope="session")
def bench_session(request):
    """What every benchmark test shares: the environment once, the store, one-GPU figures."""
    if not request.config.getoption("benchmark_only", False):
        pytest.skip("the benchmark sweep runs with `pytest --benchmark-only`")
    from .runner import machine_peak
    env = envmod.collect()
    store = results.Store(os.environ.get("BENCH_RESULTS", results.DEFAULT_ROOT))
    visible = envmod.visible_gpu_count()
    peak = machine_peak(store, env, "cuda" if visible else "cpu")
    return {"env": env, "store": store, "peak": peak, "one_gpu": {}, "visible": visible, "data_ready": set()}


def _ensure_data(case, session) -> None:
    if case.loader == "synthetic" or case.data_dir in session["data_ready"]:
        return
    from .cli import ensure_default_data
    from .data import DataError, check_size, scan
    if not os.environ.get("BENCH_DATA"):
        ensure_default_data(Path(case.data_dir), sweeps.images_needed([c for _, c in planned_cases()]))
    try:
        check_size(scan(case.data_dir), case)
    except DataError as e:
        pytest.fail(str(e))
    session["data_ready"].add(case.data_dir)


def run_benchmark(benchmark, bench_sweep, bench_case, bench_session) -> dict:
    from .launch import run_case
    from .runner import assemble
    case = bench_case
    if case.device == "cuda" and case.gpus > bench_session["visible"]:
        pytest.skip(f"needs {case.gpus} GPU(s); {bench_session['visible']} visible")
    _ensure_data(case, bench_session)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    out = {}
    benchmark.pedantic(lambda: out.update(run_case(case)), rounds=1, iterations=1, warmup_rounds=0)
    record = assemble(case, out, bench_sweep, bench_session["env"], started, bench_session["peak"])
    bench_session["store"].save(record)
    m = record["metrics"]
    info = {"status": record["status"], "reason": record["reason"], "case_id": case.case_id,
            "case": case.to_dict(), "sweep": bench_sweep}
    if record["status"] == "ok":
        key = (case.name, case.batch_size, case.precision, case.channels_last, case.loader)
        if case.gpus == 1:
            bench_session["one_gpu"][key] = m["images_per_s"]
        one = bench_session["one_gpu"].get(key)
        info.update(verdict=record["diagnosis"].get("verdict"), mfu_pct=record["diagnosis"].get("mfu_pct"),
                    images_per_s=m["images_per_s"], images_per_s_per_gpu=m["images_per_s_per_gpu"],
                    spread_pct=m["spread_pct"], data_wait_pct=m["data_wait_pct"],
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
