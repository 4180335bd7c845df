"""README as a manual that cannot drift: its table of commands, run as written in a copy of this
repository (a git checkout of its own), each against the exit code README states for a machine with
no GPU; each output excerpt checked against what its command prints now (or against the committed log
it quotes); the copy's `git status` clean after all of them; README within 300 lines. Through make,
the code checked is the bench command's own: the `Error N` line make prints for the command it ran
(make itself exits 2 for any failure)."""
import json
import re
import subprocess

import pytest

from readme_doc import README, ROOT, readme_command, readme_commands

pytestmark = pytest.mark.slow


EXCERPT = re.compile(r"<!-- excerpt(?P<vary> \(numbers vary\))?(?::(?P<cmd>[^>]+)| from (?P<file>\S+)) -->\n"
                     r"```text\n(?P<body>.*?)```", re.S)


def excerpts() -> list[dict]:
    return [{"command": (m["cmd"] or "").strip(), "file": m["file"], "vary": bool(m["vary"]),
             "chunks": [c.strip("\n").splitlines() for c in re.split(r"^\.\.\.\n", m["body"], flags=re.M)]}
            for m in EXCERPT.finditer(README)]


def normal(line: str, vary: bool) -> str:
    """A line as compared: spaces collapsed, rules of dashes shortened, numbers masked where they vary."""
    if vary:
        line = re.sub(r"\d+(?:[.,]\d+)*", "N", line)
    return re.sub(r"-{3,}", "---", " ".join(line.split()))


def appears_in_order(chunks: list[list[str]], lines: list[str], vary: bool) -> bool:
    """Each chunk as a block of consecutive lines, the chunks in their order."""
    text = [normal(ln, vary) for ln in lines]
    at = 0
    for chunk in chunks:
        want = [normal(ln, vary) for ln in chunk]
        found = next((i for i in range(at, len(text) - len(want) + 1) if text[i:i + len(want)] == want), None)
        if found is None:
            return False
        at = found + len(want)
    return True


def test_the_readme_is_a_manual_of_at_most_300_lines():
    assert len(README.splitlines()) <= 300
    commands = [c for c, _ in readme_commands()]
    for needed in ("make report", "make bench SWEEP=tiny", "bin/bench run --help", "bin/bench env", "bin/bench claims"):
        assert needed in commands
    assert any(c.startswith("make compare") for c in commands) and len(commands) >= 15
    assert len(excerpts()) == 5  # one for each of the five tasks


@pytest.mark.parametrize("command, code", readme_commands(), ids=[c[:60] for c, _ in readme_commands()])
def test_readme_command_runs_as_written(readme_copy, command, code):
    out = readme_copy.run(command)
    assert own_code(command, out) == code, f"{command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert "Traceback" not in out.stdout + out.stderr


@pytest.mark.parametrize("excerpt", excerpts(), ids=[e["command"][:40] or e["file"][-40:] for e in excerpts()])
def test_each_excerpt_is_what_its_command_prints_now(readme_copy, excerpt):
    if excerpt["file"]:  # a GPU run's log, committed: the excerpt quotes it, timestamps left off
        lines = [re.sub(r"^\d\d:\d\d:\d\d ", "", ln) for ln in (ROOT / excerpt["file"]).read_text().splitlines()]
    else:
        out = readme_copy.run(excerpt["command"])
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        lines = out.stdout.splitlines()
    assert appears_in_order(excerpt["chunks"], lines, excerpt["vary"]), "\n".join(lines[:60])


def test_the_checkout_is_clean_after_every_command(readme_copy):
    assert readme_copy.ran, "no command ran before this test"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=readme_copy.root, capture_output=True, text=True,
                            check=True)
    assert status.stdout == "", status.stdout


def own_code(command: str, out: subprocess.CompletedProcess) -> int:
    """The bench command's exit code: through make, the one its `Error N` line names."""
    if not command.startswith("make ") or out.returncode == 0:
        return out.returncode
    found = re.findall(r"\] Error (\d+)$", out.stderr, re.M)
    assert out.returncode == 2 and len(found) == 1, out.stderr[-2000:]
    return int(found[0])


NOISE_FLOOR_EXAMPLE = "bin/bench run --device cpu --model resnet18"


def test_a_case_in_fresh_processes_judged_against_the_runs_noise_floor(readme_copy):
    out = readme_copy.run(readme_command(NOISE_FLOOR_EXAMPLE))  # README's own example
    assert out.returncode == 0, out.stdout + out.stderr
    # this machine's, not the committed; README's mobilenet_v3_small run stores in sweep 'run' too
    (path,) = [p for p in (readme_copy.root / "results").glob("cpu-*/*/run/*/*.json")
               if json.loads(p.read_text())["case"]["model"] == "resnet18"]
    rec = json.loads(path.read_text())
    from bench.store import record
    assert rec["schema"] == record.SCHEMA and rec["definitions"] == record.DEFINITIONS
    assert path.stem == rec["run_id"]
    m = rec["metrics"]
    figures = [p["images_per_s"] for p in rec["processes"]]
    assert m["processes"] == 2 and len(figures) == 2 and m["images_per_s"] == pytest.approx(sum(figures) / 2)
    lo, hi = m["images_per_s_ci95"]
    assert lo < m["images_per_s"] < hi
    # windows are bounded by time: each holds the steps that last about 0.4 s (at least the 2 asked for), on a
    # busy host too
    assert m["steps_per_window"] >= 2 and m["steps_per_window"] * m["step_time_median_s"] > 0.25
    assert min(w for p in rec["processes"] for ws in p["windows_s"] for w in ws) > 0.25
    assert m["input_stall_pct"] is not None and m["compute_dtypes"] == {"cpu": "float32"}
    manifest = json.loads((path.parents[2] / "runs" / f"{rec['run_id']}.json").read_text())
    assert manifest["noise_floor"]["n"] == 2 and manifest["noise_floor_end"]["n"] == 2
    assert manifest["finished_at"] and manifest["interrupted"] is False
    assert "95% interval" in out.stdout and "process-to-process sd" in out.stdout


def test_make_reports_the_commands_own_code():
    failed = subprocess.CompletedProcess("make x", 2, "", "make: *** [Makefile:34: bench] Error 1\n")
    assert own_code("make bench", failed) == 1
    assert own_code("make bench", subprocess.CompletedProcess("make x", 0, "", "")) == 0
    assert own_code("bin/bench env", subprocess.CompletedProcess("x", 2, "", "")) == 2


def test_an_excerpt_must_appear_in_order_and_whole():
    lines = ["a 1", "b 22", "c", "d"]
    assert appears_in_order([["a 1", "b 22"], ["d"]], lines, False)
    assert not appears_in_order([["a 1", "c"]], lines, False)  # not consecutive
    assert not appears_in_order([["c"], ["a 1"]], lines, False)  # out of order
    assert appears_in_order([["b 7"]], lines, True) and not appears_in_order([["b 7"]], lines, False)
