"""README's table of commands, run as written in a copy of this repository, each against the exit
code README states for a machine with no GPU: README cannot drift from the code. The code checked is
the bench command's own: through make, the `Error N` line make prints for the command it ran (make
itself exits 2 for any failure)."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def readme_commands() -> list[tuple[str, int]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Every command, and what it returns on a machine with no GPU", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        command, code = cells[0].strip("`"), re.match(r"(\d+)", cells[2])
        long = "BENCH_README_LONG" in cells[2]
        if code and "not re-run" not in cells[2] and (not long or os.environ.get("BENCH_README_LONG")):
            rows.append((command, int(code.group(1))))
    return rows


def test_the_table_lists_the_commands_a_user_needs():
    commands = [c for c, _ in readme_commands()]
    for needed in ("make report", "make bench SWEEP=tiny", "bin/bench run --help", "bin/bench env"):
        assert needed in commands
    assert any(c.startswith("make compare") for c in commands) and len(commands) >= 15


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """The tracked tree in a fresh folder, with this test run's Python standing in for `.venv`."""
    dst = tmp_path_factory.mktemp("readme") / "repo"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
    for f in filter(None, files):
        if (ROOT / f).exists():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dst / f)
    (dst / ".venv").symlink_to(Path(sys.prefix))  # what make built; make itself is told the same Python
    return dst


@pytest.mark.parametrize("command, code", readme_commands(), ids=[c[:60] for c, _ in readme_commands()])
def test_readme_command_runs_as_written(copy, command, code, tmp_path):
    env = dict(os.environ, PY=sys.executable, BENCH_DATA_CACHE=str(tmp_path / "cache"))
    env.pop("BENCH_COMMIT", None)
    out = subprocess.run(command, shell=True, cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert own_code(command, out) == code, f"{command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert "Traceback" not in out.stdout + out.stderr


def own_code(command: str, out: subprocess.CompletedProcess) -> int:
    """The bench command's exit code: through make, the one its `Error N` line names."""
    if not command.startswith("make ") or out.returncode == 0:
        return out.returncode
    found = re.findall(r"\] Error (\d+)$", out.stderr, re.M)
    assert out.returncode == 2 and len(found) == 1, out.stderr[-2000:]
    return int(found[0])


def test_make_reports_the_commands_own_code():
    failed = subprocess.CompletedProcess("make x", 2, "", "make: *** [Makefile:34: bench] Error 1\n")
    assert own_code("make bench", failed) == 1
    assert own_code("make bench", subprocess.CompletedProcess("make x", 0, "", "")) == 0
    assert own_code("bin/bench env", subprocess.CompletedProcess("x", 2, "", "")) == 2
