"""The suite's sweeps as pytest-benchmark tests: `pytest --benchmark-only` (skipped by plain pytest)."""
from bench.pytest_plugin import run_benchmark


def test_case(benchmark, bench_sweep, bench_case, bench_session):
    run_benchmark(benchmark, bench_sweep, bench_case, bench_session)
