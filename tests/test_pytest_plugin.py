import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def test_benchmark_only_runs_the_cases_and_records_them(tmp_path):
    env = dict(os.environ, BENCH_SWEEPS="tiny", BENCH_RESULTS=str(tmp_path / "r"), BENCH_COMMIT="feedc0ffee12")
    saved = f"file://{tmp_path / 'saved'}"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--benchmark-only",
                          f"--benchmark-json={tmp_path / 'b.json'}", "--benchmark-autosave", f"--benchmark-storage={saved}",
                          "tests/test_benchmark_cases.py"],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed, 1 skipped" in out.stdout
    assert "needs 2 GPU(s); 0 visible" in out.stdout  # a case needing more GPUs says why it is skipped
    report = json.loads((tmp_path / "b.json").read_text())
    for key in ("gpu_model", "gpu_count", "driver", "cuda", "nccl", "torch"):
        assert key in report["machine_info"]
    benches = {b["param"].split(":")[1].split("-")[0]: b for b in report["benchmarks"]}
    assert set(benches) == {"single", "ddp"}
    single, ddp = benches["single"]["extra_info"], benches["ddp"]["extra_info"]
    # the parameter is the case id, a string: no UNSERIALIZABLE[Case(...)] in saved files
    assert benches["single"]["params"]["bench_case"] == single["case_id"] and "UNSERIALIZABLE" not in json.dumps(report)
    assert single["metrics"]["images_per_s"] == single["images_per_s"] and single["run_id"]
    assert single["status"] == "ok" and single["images_per_s"] > 0
    assert single["case"]["model"] == "resnet18" and single["sweep"] == "tiny"
    assert single["verdict"] == "compute-bound" and single["mfu_pct"] > 0
    assert ddp["images_per_s_per_gpu"] == pytest.approx(ddp["images_per_s"] / 2)
    stored = [json.loads(p.read_text()) for p in (tmp_path / "r").rglob("tiny/*/*.json")]
    assert sorted(r["case"]["name"] for r in stored) == ["ddp", "single"]  # the same results land in results/
    assert {r["sweep"] for r in stored} == {"tiny"}
    # both stores name the commit BENCH_COMMIT gives, not whatever .git the copied tree has
    assert report["commit_info"]["id"] == "feedc0ffee12" and report["commit_info"]["dirty"] is False
    assert {r["commit_folder"] for r in stored} == {"feedc0ffee12"}

    # what pytest-benchmark stores is seconds per image, one value per measured window: OPS = images/s
    bench = benches["single"]
    assert bench["stats"]["rounds"] == 3
    (record,) = [r for r in stored if r["case"]["name"] == "single"]
    windows = record["processes"][0]["images_per_s_repeats"]
    assert bench["stats"]["ops"] == pytest.approx(1 / (sum(1 / x for x in windows) / len(windows)))

    # a later run compares itself with the saved one, as pytest-benchmark users expect, and its regression
    # check judges throughput: quiet on a repeat of the same commit, loud on a 10x slowdown. It judges the
    # fastest window, with a wide threshold: on a loaded 2-core machine a repeat has moved the mean by 70%
    # (windows 7.2-17.0 ms per image) while its fastest window moved 8%, and once a 4x slowdown stayed
    # within 2x of the saved fastest window.
    (first,) = (tmp_path / "saved").rglob("0001_*.json")  # pytest-benchmark names it from git itself
    assert json.loads(first.read_text())["commit_info"]["id"] == "feedc0ffee12"
    gate = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-only",
            f"--benchmark-storage={saved}", "--benchmark-compare=0001", "--benchmark-compare-fail=min:100%",
            "-k", "single", "tests/test_benchmark_cases.py"]
    same = subprocess.run(gate, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert same.returncode == 0, same.stdout + same.stderr
    both = same.stdout + same.stderr
    assert "Comparing against benchmarks from: " in both and first.name in both
    assert "(0001_" in same.stdout and "(NOW)" in same.stdout  # both rows in the table
    slowed = subprocess.run(gate, cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env=dict(env, BENCH_INJECT_SLOWDOWN_PCT="900"))
    assert slowed.returncode != 0 and "Performance has regressed" in slowed.stdout + slowed.stderr


def test_a_benchmark_session_refuses_to_measure_beside_another_run(tmp_path):
    from bench.harness import env as envmod
    from bench.store.tree import Store
    held = Store(tmp_path / "r")
    held.lock(envmod.machine_slug(envmod.collect()), "pid 1, run r-elsewhere")  # a sweep measuring here now
    try:
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-only",
                              "tests/test_benchmark_cases.py"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, BENCH_SWEEPS="tiny", BENCH_RESULTS=str(tmp_path / "r")))
    finally:
        held.unlock()
    assert out.returncode == 2, out.stdout + out.stderr
    assert "another run is measuring on" in out.stdout + out.stderr and "r-elsewhere" in out.stdout + out.stderr
    assert not list((tmp_path / "r").rglob("*.json"))  # nothing measured, nothing stored


def test_plain_pytest_does_not_run_the_sweep():
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_benchmark_cases.py"],
                         cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, BENCH_SWEEPS="tiny"), timeout=120)
    assert out.returncode == 0 and "3 skipped" in out.stdout, out.stdout


def test_planned_cases_on_a_two_gpu_machine(monkeypatch):
    from bench import pytest_plugin
    from bench.harness import env
    monkeypatch.setattr(env, "visible_gpu_count", lambda: 2)
    monkeypatch.setenv("BENCH_SWEEPS", "seed,ablation")
    monkeypatch.setenv("BENCH_DATA", "/data")
    planned = pytest_plugin.planned_cases()
    seed = [c for s, c in planned if s == "seed"]
    assert sorted({c.gpus for c in seed}) == [1, 2, 4]  # the 4-GPU row is planned, then skipped with its reason
    ablation = [c for s, c in planned if s == "ablation"]
    assert ablation and {c.gpus for c in ablation} == {2}  # runs where it can, not all skipped
    assert all(c.data_dir == "/data" for c in ablation)
