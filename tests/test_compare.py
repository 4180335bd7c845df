import json
import shutil

import pytest

from bench.analysis import compare
from bench.store import query, record, tree
from bench.cli.main import main
from stored import FIXTURES, current, fixture_dicts

COMMIT_A, COMMIT_B = "a1b2c3d4e5f6", "b2c3d4e5f6a7"
MACHINE = "4x-nvidia-geforce-rtx-3090"


def _store(root, commit, run_id, factor_by_gpus=None, half_pct=1.0, dirty=False, drop=(), fail=(), gpu_model=None,
           started="2026-02-01"):
    """Write the fixture cases as one run of `commit`, each figure scaled by a factor per GPU count."""
    store = tree.Store(root)
    folder = commit + ("-dirty" if dirty else "")
    for rec in fixture_dicts():
        if rec["case"]["name"] in drop or rec["status"] != "ok":
            continue
        k = (factor_by_gpus or {}).get(rec["case"]["gpus"], 1.0)
        r = current(rec, half_pct, run_id=run_id, images_per_s=rec["metrics"]["images_per_s"] * k)
        r["commit_folder"], r["env"] = folder, {**r["env"], "commit": commit + "0" * 28, "dirty": dirty}
        r["started_at"] = rec["started_at"].replace("2026-01-01", started)
        if gpu_model:
            r["env"]["gpu_model"] = gpu_model
        if r["case"]["name"] in fail:
            r.update(status="timeout", reason="no result within timeout_s=600", metrics={})
        r.pop(record.READ_PATH, None)
        store.save(r)


@pytest.fixture
def root(tmp_path):
    _store(tmp_path, COMMIT_A, "20260101T000000Z-aaaa", started="2026-01-01")
    return tmp_path


def _side(root, ref):
    return compare.resolve(ref, query.load([root])[0])[1]


def test_faster_slower_and_within_noise(root):
    # 1 GPU: +0.5% (inside +-1.4% combined noise), 2 GPUs: +10%, 4 GPUs: -10%
    _store(root, COMMIT_B, "20260201T000000Z-bbbb", {1: 1.005, 2: 1.10, 4: 0.90})
    rows = compare.compare(_side(root, COMMIT_A), _side(root, "b2c3d4"))
    by_gpus = {r["case"].split("-g")[1].split("-")[0]: r for r in rows if r["case"].startswith("seed-baseline")}
    assert by_gpus["1"]["verdict"] == "within noise" and by_gpus["1"]["delta_pct"] == pytest.approx(0.5)
    assert by_gpus["1"]["noise_pct"] == pytest.approx(2 ** 0.5)
    assert by_gpus["2"]["verdict"] == "faster" and by_gpus["2"]["delta_pct"] == pytest.approx(10.0)
    assert by_gpus["4"]["verdict"] == "slower" and by_gpus["4"]["delta_pct"] == pytest.approx(-10.0)


def test_a_case_measured_in_longer_windows_in_b_is_still_the_same_case(root):
    """Cases pair by case id, computed from the stored case (core/identity.py): how long each side
    measured may differ, and the id a record was stored under does not matter."""
    _store(root, COMMIT_B, "20260201T000000Z-bbbb", {1: 0.90})
    b_root = root / "4x-nvidia-geforce-rtx-3090" / COMMIT_B
    for f in b_root.rglob("seed-baseline-*-g1-*/*.json"):
        rec = json.loads(f.read_text())
        rec["case"]["min_window_s"] = 2.5  # a later commit's longer windows: another case id
        rec["case_id"] = rec["case_id"].rsplit("-", 1)[0] + "-0000beef"
        f.write_text(json.dumps(rec))
    rows = compare.compare(_side(root, COMMIT_A), _side(root, COMMIT_B))
    row = next(r for r in rows if r["case"].startswith("seed-baseline-resnet50-dp-g1-"))
    assert row["verdict"] == "slower" and COMMIT_B in row["b_file"] and not row["case"].endswith("-0000beef")
    assert not any(r["verdict"] == "not in both" for r in rows)


def test_gate_exit_codes_and_json(root, tmp_path, capsys):
    _store(root, COMMIT_B, "20260201T000000Z-bbbb", {4: 0.90})
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--fail-under", "5"]) == 1
    assert "2 case(s) regressed" in capsys.readouterr().out
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--fail-under", "15"]) == 0
    out_json = tmp_path / "cmp.json"
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--json", str(out_json)]) == 0
    doc = json.loads(out_json.read_text())
    s = doc["summary"]
    assert s["kind"] == "A/B" and s["a"]["label"].startswith("commit a1b2c3d4e5f6") and s["a"]["commits"] == [COMMIT_A]
    assert s["b"]["runs"] == ["20260201T000000Z-bbbb"] and s["b"]["machines"] == [MACHINE]
    assert s["b"]["images_per_s_definitions"] == [4] and s["threshold_pct"] is None and s["exit_code"] == 0
    assert s["counts"] == {"slower": 2, "within noise": 4} and s["regressed"] == []
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--json", str(out_json), "--fail-under", "5"]) == 1
    s = json.loads(out_json.read_text())["summary"]
    assert s["threshold_pct"] == 5 and s["exit_code"] == 1 and len(s["regressed"]) == 2
    assert all(c.startswith("seed-") and "-g4-" in c for c in s["regressed"])
    doc = json.loads(out_json.read_text())
    row = next(c for c in doc["cases"] if c["case"].startswith("seed-baseline-resnet50-dp-g4"))
    assert row["verdict"] == "slower" and row["delta_pct"] == pytest.approx(-10.0)
    assert row["a_images_per_s"] == pytest.approx(498.4) and row["b_images_per_s"] == pytest.approx(448.56)


def test_a_case_failing_in_b_fails_the_gate(root, capsys):
    _store(root, COMMIT_B, "20260201T000000Z-bbbb", fail=("seed-optimized",))
    rows = compare.compare(_side(root, COMMIT_A), _side(root, COMMIT_B))
    by_name = {r["case"].split("-resnet50")[0]: r["verdict"] for r in rows}
    assert by_name == {"seed-baseline": "within noise", "seed-optimized": "failed in b"}
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--fail-under", "50"]) == 1
    assert "failed in b" in capsys.readouterr().out


def test_a_case_missing_in_b_is_not_in_both_and_a_regression_only_when_asked(root, capsys):
    """Sweeps differ between commits: a case one side did not run is listed, not a regression."""
    _store(root, COMMIT_B, "20260201T000000Z-bbbb", drop=("seed-optimized",))
    rows = compare.compare(_side(root, COMMIT_A), _side(root, COMMIT_B))
    assert {r["case"].split("-resnet50")[0]: r["verdict"] for r in rows} == {
        "seed-baseline": "within noise", "seed-optimized": "not in both"}
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--fail-under", "5"]) == 0
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--fail-under", "5",
                 "--require-same-cases"]) == 1
    assert "ok in a but failed or missing in b" in capsys.readouterr().out


def test_nothing_in_common_is_an_error_never_a_pass(root, capsys):
    _store(root, COMMIT_B, "20260201T000000Z-bbbb", fail=("seed-baseline", "seed-optimized"))
    # every case failed in b: judged, a regression with a gate; a side with nothing ok and nothing to
    # pair is refused
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--fail-under", "5"]) == 1
    with pytest.raises(compare.CompareError, match="nothing could be judged"):
        compare.compare(_side(root, COMMIT_B), _side(root, COMMIT_A))
    assert main(["compare", COMMIT_B, COMMIT_A, "--results", str(root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: nothing could be judged: 6 case(s) in a, 6 in b, 0 ok on both")


def test_an_a_over_a_where_nothing_is_judged_exits_2_never_passes(tmp_path, capsys):
    """Two records under an older definition that cannot be re-derived: shown, never judged."""
    shutil.copytree(FIXTURES, tmp_path / "r")  # schema 1: no per-process windows
    records = query.load([tmp_path / "r"])[0]
    assert records and not any(r.current for r in records)
    assert main(["compare", str(tmp_path / "r"), str(tmp_path / "r"), "--results", str(tmp_path / "r"),
                 "--fail-under", "5"]) == 2
    assert "nothing could be judged" in capsys.readouterr().err


def test_exact_commit_dirty_is_another_tree(root, capsys):
    _store(root, COMMIT_B, "20260201T000000Z-dddd", {1: 0.5}, dirty=True)
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root)]) == 2
    assert "ask for b2c3d4e5f6a7-dirty" in capsys.readouterr().err
    assert main(["compare", COMMIT_A, COMMIT_B + "-dirty", "--results", str(root), "--fail-under", "5"]) == 1


def test_two_runs_of_one_commit_are_both_kept_and_compare_as_a_over_a(root, tmp_path):
    _store(root, COMMIT_A, "20260102T000000Z-a2a2", {1: 1.004, 2: 0.996}, started="2026-01-02")
    files = list((root / MACHINE / COMMIT_A).rglob("*.json"))
    assert len([f for f in files if "seed-baseline-resnet50-dp-g1" in str(f)]) == 2  # both runs kept
    out = tmp_path / "aa.json"
    assert main(["compare", "20260101T000000Z-aaaa", "20260102T000000Z-a2a2", "--results", str(root),
                 "--fail-under", "5", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["summary"]["kind"] == "A/A" and {c["verdict"] for c in doc["cases"]} == {"within noise"}
    # a commit reference takes each case's latest run
    latest = _side(root, COMMIT_A)
    assert {r.run_id for r in latest} == {"20260102T000000Z-a2a2"}


def test_only_some_cases(root, tmp_path):
    _store(root, COMMIT_B, "20260201T000000Z-bbbb", {4: 0.5}, drop=("seed-optimized",))
    out = tmp_path / "c.json"
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--only", "seed-baseline-*",
                 "--fail-under", "5", "--json", str(out)]) == 1
    doc = json.loads(out.read_text())
    assert {c["case"].split("-resnet50")[0] for c in doc["cases"]} == {"seed-baseline"}  # no "not in both" rows
    assert sorted(c["verdict"] for c in doc["cases"]) == ["slower", "within noise", "within noise"]


def test_different_hardware_is_refused_unless_forced(root, capsys):
    _store(root, COMMIT_B, "20260201T000000Z-bbbb", gpu_model="NVIDIA H200")
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root)]) == 2
    assert "different hardware" in capsys.readouterr().err
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(root), "--force"]) == 0


def test_older_definitions_are_shown_but_not_judged(tmp_path, capsys):
    shutil.copytree(FIXTURES, tmp_path / "r")
    _store(tmp_path / "r", COMMIT_B, "20260201T000000Z-bbbb", {4: 0.5})
    # the fixtures (commit a) are schema 1, older and not re-derivable: nothing can be judged
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(tmp_path / "r"), "--fail-under", "5"]) == 2
    assert "nothing could be judged" in capsys.readouterr().err
    assert main(["compare", COMMIT_A, COMMIT_B, "--results", str(tmp_path / "r"), "--fail-under", "5", "--include-old"]) == 1


def test_unknown_reference_is_named(root, capsys):
    assert main(["compare", "deadbeef", COMMIT_A, "--results", str(root)]) == 2
    assert "'deadbeef' is neither a run id, a result folder nor a commit with results" in capsys.readouterr().err


def test_history_lists_every_run_oldest_first(root, capsys):
    _store(root, COMMIT_B, "20260201T000000Z-bbbb", {4: 0.9})
    assert main(["history", "seed-baseline-resnet50-dp-g4-bs256", "--results", str(root)]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith(("| a1b2", "| b2c3"))]
    assert [ln.split("|")[1].strip() for ln in lines] == [COMMIT_A, COMMIT_B]  # commit order
    assert "498.4" in lines[0] and "448.6" in lines[1] and "20260201T000000Z-bbbb" in lines[1]
    plot = root / MACHINE / "history"
    assert [p.suffix for p in plot.iterdir()] == [".png"] and f"plot: {next(plot.iterdir())}" in out
    assert main(["history", "no-such-case", "--results", str(root)]) == 2


def test_the_last_two_committed_h100_commits_compare_case_by_case(capsys):
    """A GPU machine's commit that also holds cases on its CPU ranks (bench feed) is the same hardware: the
    cases both commits ran are matched and judged, and a figure measured beside another's work says so."""
    assert main(["compare", "7b24b833c027", "6b45861ecaf0", "--machine", "1x-nvidia-h100-80gb-hbm3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("A/B, b against a: 8 not in both, 10 within noise")
    assert "| [10] custom " in out and "4,728.3 (GPU shared)" in out
