"""The side-by-side A/B: the paired statistic against hand-computed values, the interleaving order,
K from the noise, the sides it accepts and refuses, and `bench ab` on two worktrees of a test
repository."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.analysis import ab
from bench.analysis.compare import FAILED_IN_A, FAILED_IN_B, NEITHER
from bench.cli.main import main
from bench.core import paired
from bench.core.errors import BenchError
from bench.harness import sides

ROOT = Path(__file__).resolve().parent.parent


# --- the paired statistic ------------------------------------------------------------------------
def test_paired_change_by_hand_without_a_floor():
    # d = ln(0.97), ln(0.98), ln(0.96): mean -0.0304946, sd 0.0103097, se 0.0059523, t(2) = 4.302653,
    # half-width 0.025611; change expm1(-0.0304946) = -3.0034%, interval expm1(-0.0561056) = -5.4561%
    # to expm1(-0.0048836) = -0.4872%: all below zero, so slower
    c = paired.paired_change([100, 100, 100], [97, 98, 96])
    assert c["delta_pct"] == pytest.approx(-3.00344, abs=1e-4)
    assert c["ci95_pct"] == pytest.approx([-5.45607, -0.48718], abs=1e-4)
    assert c["df"] == 2 and c["verdict"] == "slower"


def test_paired_change_pooled_with_the_floor_by_hand():
    # the floor's 3 processes at 1% sd add 2 df and a difference variance of 2 * 0.01^2:
    # pooled (2 * 1.062895e-4 + 2 * 2e-4) / 4 = 1.5314475e-4, se sqrt(pooled / 3) = 0.0071448,
    # t(4) = 2.776445, half-width 0.019837: interval -4.9086% to -1.0601%
    c = paired.paired_change([100, 100, 100], [97, 98, 96], {"n": 3, "rel_sd": 0.01})
    assert c["ci95_pct"] == pytest.approx([-4.90858, -1.06012], abs=1e-4)
    assert c["df"] == 4 and c["verdict"] == "slower"


def test_paired_change_within_noise_faster_and_inconclusive():
    assert paired.paired_change([100, 101, 99], [100.5, 100, 99.8])["verdict"] == "within noise"
    assert paired.paired_change([100, 100], [110, 111])["verdict"] == "faster"
    one = paired.paired_change([100], [90])
    assert one["verdict"] == "inconclusive" and one["noise_pct"] is None and one["delta_pct"] == pytest.approx(-10)
    # a single pair with a floor has the floor's degrees of freedom
    assert paired.paired_change([100], [90], {"n": 3, "rel_sd": 0.001})["verdict"] == "slower"
    with pytest.raises(ValueError):
        paired.paired_change([1, 2], [1])


def test_pairs_needed_from_the_noise():
    # 1% process-to-process sd, threshold 3%: half-width must be <= 1.5%. With a floor of 3: 5 pairs give
    # t(6) * sqrt(2 * 0.01^2 / 5) = 2.4469 * 0.0063246 -> 1.5596%; 6 pairs t(7) * 0.0057735 -> 1.3746%
    assert paired.half_width_pct(0.01, 5, 3) == pytest.approx(1.5596, abs=1e-3)
    assert paired.half_width_pct(0.01, 6, 3) == pytest.approx(1.3746, abs=1e-3)
    assert paired.pairs_needed(0.01, 3, 3) == 6
    assert paired.pairs_needed(0.001, 3, 3) == paired.MIN_PAIRS
    assert paired.pairs_needed(0.2, 3, 3) is None  # beyond MAX_PAIRS
    assert paired.pairs_needed(0.005, 3, 3) < paired.pairs_needed(0.01, 3, 3) < paired.pairs_needed(0.01, 2, 3)


# --- planning ------------------------------------------------------------------------------------
def test_interleaving_alternates_abba_and_takes_cases_in_turn():
    assert ab.interleaving(2, 0, 2) == [(0, 0, "a"), (0, 0, "b"), (0, 1, "a"), (0, 1, "b"),
                                        (1, 0, "b"), (1, 0, "a"), (1, 1, "b"), (1, 1, "a")]
    assert ab.interleaving(1, 3, 1) == [(3, 0, "b"), (3, 0, "a")]
    order = ab.interleaving(3, 0, 6)
    for side in "ab":  # over an even number of pairs each side runs first as often as second
        assert sum(1 for i in range(0, len(order), 2) if order[i][2] == side) == 9


def test_plan_pairs_from_the_floor_and_the_budget():
    floor = {"n": 3, "rel_sd": 0.01}
    p = ab.plan_pairs(floor, 3.0, budget_s=600, round_s=40)
    assert (p.pairs, p.needed, p.fits) == (6, 6, 15)
    assert p.message.startswith("6 pairs decide 3% at the floor's process-to-process sd 1.00%")
    short = ab.plan_pairs(floor, 3.0, budget_s=60, round_s=20)
    assert (short.pairs, short.needed, short.fits) == (3, 6, 3)
    assert short.message.startswith("cannot decide at 3% within 1m00s") and "needs about 6 pairs (2m00s)" in short.message
    assert ab.plan_pairs(floor, 3.0, 600, 40, asked=4).pairs == 4
    assert ab.plan_pairs(None, 3.0, 100, 40).pairs == paired.MIN_PAIRS
    assert "needs more than" in ab.plan_pairs({"n": 3, "rel_sd": 0.3}, 3.0, 600, 40).message


def test_rows_carry_failures_and_pairs():
    ok = ab.row("c", "amp", [100, 100, 100], [97, 98, 96], None)
    assert ok["verdict"] == "slower" and ok["pairs"] == 3 and ok["a_images_per_s"] == 100
    assert ab.row("c", "amp", [100], [], None, {"b": "error: boom"})["verdict"] == FAILED_IN_B
    assert ab.row("c", "amp", [], [100], None, {"a": "oom: x"})["verdict"] == FAILED_IN_A
    assert ab.row("c", "amp", [], [], None, {"a": "x", "b": "y"})["verdict"] == NEITHER
    assert ab.undecided(ok, 3.0) and not ab.undecided({"noise_pct": 1.0}, 3.0)


# --- sides -----------------------------------------------------------------------------------------
def test_sides_refuse_in_one_line(tmp_path):
    with pytest.raises(BenchError, match="neither a commit of this repository"):
        sides.resolve("a", "no-such-commit-xyz", {})
    with pytest.raises(BenchError, match="holds no suite"):
        sides.resolve("b", str(tmp_path), {})
    with pytest.raises(BenchError, match="is not NAME=VALUE"):
        sides.parse_env(["BENCH_INJECT_SLOWDOWN_PCT"], "--b-env")
    assert sides.parse_env(["X=1", "Y=a=b"], "--a-env") == {"X": "1", "Y": "a=b"}
    folder = sides.resolve("a", str(ROOT), {})
    assert folder.root == ROOT and not folder.worktree and folder.starts_ahead


@pytest.mark.parametrize("args, says", [
    (["no-such-commit-xyz", "HEAD"], "A: 'no-such-commit-xyz' is neither a commit"),
    (["HEAD", "HEAD", "--b-env", "oops"], "--b-env 'oops' is not NAME=VALUE"),
    (["HEAD", "HEAD", "--threshold", "0"], "--threshold 0 must be a percentage above 0"),
    (["HEAD", "HEAD", "--floor-processes", "1"], "--floor-processes 1 must be 0 (none) or 2 or more"),
    (["HEAD", "HEAD", "amp"], "sweep 'amp' needs GPUs and none is visible"),
    (["HEAD", "HEAD", "--only", "nothing-*"], "--only nothing-* matches no case id"),
])
def test_ab_refuses_bad_input_before_any_work(args, says, capsys, tmp_path):
    assert main(["ab", *args, "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not (tmp_path / "cpu-2-cores").exists() or not list(tmp_path.rglob("ab-*.json"))


# --- the whole command on two worktrees of a test repository ----------------------------------------
def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def test_repo(tmp_path):
    """A git repository holding this suite at two commits: the second only adds a comment."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(ROOT / "bench", repo / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", "bench")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "one")
    (repo / "bench" / "worker" / "phases.py").write_text((repo / "bench/worker/phases.py").read_text() + "# two\n")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-am", "two")
    return repo, _git(repo, "rev-parse", "HEAD~1"), _git(repo, "rev-parse", "HEAD")


@pytest.mark.slow
def test_ab_on_two_worktrees_catches_a_slowed_side(test_repo, tmp_path):
    repo, one, two = test_repo
    results = tmp_path / "results"
    run = subprocess.run([sys.executable, "-m", "bench", "ab", one, two, "tiny", "--only", "single-*", "--pairs", "2",
                          "--floor-processes", "2", "--b-env", "BENCH_INJECT_SLOWDOWN_PCT=150",
                          "--results", str(results)], cwd=repo, capture_output=True, text=True, timeout=600)
    doc = json.loads(next(results.rglob("ab-*.json")).read_text())
    case = doc["cases"][0]
    # 2.5 times the step time on b: about -60%. A busy 2-core machine can still widen the interval past
    # it, so the verdict may be `within noise`, but the exit code always follows the verdict
    assert case["pairs"] == 2 and case["delta_pct"] < -30 and case["verdict"] in ("slower", "within noise")
    slower = case["verdict"] == "slower"
    assert run.returncode == (1 if slower else 0), run.stdout + run.stderr
    assert (f"kind: A/B; 1 {case['verdict']}" in run.stdout) and (
        ("1 case(s) slower in b beyond their noise" in run.stdout) == slower)
    assert doc["summary"]["exit_code"] == run.returncode and doc["ab"]["interrupted"] is False
    procs = doc["ab"]["processes"]
    # the floor on a, then pairs in ABBA order; each side's worker imported from its own worktree
    assert [p["side"] for p in procs] == ["a", "a", "a", "b", "b", "a"]
    roots = {side: {Path(p["worker_root"]).name for p in procs if p["side"] == side} for side in "ab"}
    assert roots == {"a": {f"a-{one[:12]}"}, "b": {f"b-{two[:12]}"}}
    assert all(p["phases_s"]["windows_s"] > 0 for p in procs)
    assert doc["summary"]["a"]["commit"] == one and doc["summary"]["b"]["env"] == {"BENCH_INJECT_SLOWDOWN_PCT": "150"}
    # the worktrees are gone, and git knows it
    assert _git(repo, "worktree", "list").count("\n") == 0
