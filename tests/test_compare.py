import json
import shutil
from pathlib import Path

import pytest

from bench import compare
from bench.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "results"
COMMIT_A = "a1b2c3d4e5f6"


def _second_commit(root: Path, factor_by_gpus: dict, commit="b2c3d4e5f6a7", gpu_model=None) -> None:
    """Copy the fixture commit as a later one, scaling every repeat by a factor per GPU count."""
    src = root / "4x-nvidia-geforce-rtx-3090" / COMMIT_A
    dst = root / "4x-nvidia-geforce-rtx-3090" / commit
    shutil.copytree(src, dst)
    for f in dst.rglob("*.json"):
        rec = json.loads(f.read_text())
        rec["commit_folder"], rec["started_at"] = commit, rec["started_at"].replace("2026-01-01", "2026-02-01")
        if gpu_model:
            rec["env"]["gpu_model"] = gpu_model
        k = factor_by_gpus.get(rec["case"]["gpus"], 1.0)
        m = rec["metrics"]
        for key in ("images_per_s", "images_per_s_min", "images_per_s_max", "images_per_s_per_gpu"):
            if key in m:
                m[key] *= k
        f.write_text(json.dumps(rec))


@pytest.fixture
def root(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "r")
    return tmp_path / "r"


def test_improvement_regression_and_noise(root, capsys):
    # 1 GPU: +0.5% (inside the +-1% repeats), 2 GPUs: +10%, 4 GPUs: -10%
    _second_commit(root, {1: 1.005, 2: 1.10, 4: 0.90})
    rows = compare.compare(compare.load_ref(COMMIT_A, root), compare.load_ref("b2c3d4", root))
    by_gpus = {r["case"].split("-g")[1].split("-")[0]: r for r in rows if r["case"].startswith("seed-baseline")}
    assert by_gpus["1"]["verdict"] == "within noise" and by_gpus["1"]["change_pct"] == pytest.approx(0.5)
    assert by_gpus["2"]["verdict"] == "faster" and by_gpus["2"]["change_pct"] == pytest.approx(10.0)
    assert by_gpus["4"]["verdict"] == "slower" and by_gpus["4"]["change_pct"] == pytest.approx(-10.0)
    assert len(rows) == 6  # the oom case is in neither as ok

    assert main(["compare", COMMIT_A, "b2c3d4", "--results", str(root), "--fail-under", "5"]) == 1
    assert "2 case(s) regressed by more than 5%" in capsys.readouterr().out
    assert main(["compare", COMMIT_A, "b2c3d4", "--results", str(root), "--fail-under", "15"]) == 0
    assert main(["compare", COMMIT_A, "b2c3d4", "--results", str(root)]) == 0
    out = capsys.readouterr().out
    assert "| seed    | seed-baseline-resnet50-dp-g4" in out and "-10.0%" in out


def test_different_hardware_is_refused_unless_forced(root, capsys):
    _second_commit(root, {}, gpu_model="NVIDIA H200")
    with pytest.raises(SystemExit) as e:
        main(["compare", COMMIT_A, "b2c3d4", "--results", str(root)])
    assert "different hardware" in str(e.value) and "--force" in str(e.value)
    assert main(["compare", COMMIT_A, "b2c3d4", "--results", str(root), "--force"]) == 0


def test_unknown_reference_is_named(root):
    with pytest.raises(SystemExit) as e:
        main(["compare", "deadbeef", COMMIT_A, "--results", str(root)])
    assert "'deadbeef' is neither a result folder nor a commit with results" in str(e.value)


def test_history_lists_a_case_oldest_first(root, capsys):
    _second_commit(root, {4: 0.9})
    assert main(["history", "seed-baseline-resnet50-dp-g4-bs256", "--results", str(root)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| 2026")]
    assert [ln.split("|")[2].strip() for ln in lines] == [COMMIT_A, "b2c3d4e5f6a7"]
    assert "498.4" in lines[0] and "448.6" in lines[1]
    with pytest.raises(SystemExit):
        main(["history", "no-such-case", "--results", str(root)])
