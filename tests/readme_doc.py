"""README's command table and excerpts, and its commands run as written in a copy of this repository
(a git checkout of its own): the end-to-end runs that the README test and the tests of what those
commands store share, each run once per test session."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def readme_commands() -> list[tuple[str, int]]:
    section = README.split("## Every command, and what it returns on a machine with no GPU", 1)[1].split("\n## ", 1)[0]
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


def readme_command(starting: str) -> str:
    """The one command of README's table that starts with `starting`."""
    (found,) = [c for c, _ in readme_commands() if c.startswith(starting)]
    return found


class Copy:
    """The tracked tree in a fresh folder made a git checkout, with this test run's Python standing in
    for `.venv`; `run` runs a command there once and keeps what it printed."""

    def __init__(self, parent: Path):
        self.root = parent / "repo"
        self.ran: dict[tuple, subprocess.CompletedProcess] = {}
        files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.split("\n")
        for f in filter(None, files):
            if (ROOT / f).exists():
                (self.root / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, self.root / f)
        (self.root / ".venv").symlink_to(Path(sys.prefix))  # what make built; make itself is told the same Python
        git = ["git", "-c", "user.name=readme", "-c", "user.email=readme@example.invalid"]
        subprocess.run(git + ["init", "-q"], cwd=self.root, check=True)
        (self.root / ".git" / "info" / "exclude").write_text(".venv\n")  # a link here, a folder in a real checkout
        subprocess.run(git + ["add", "-A"], cwd=self.root, check=True)
        subprocess.run(git + ["commit", "-qm", "copy"], cwd=self.root, check=True)
        self.commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=self.root, capture_output=True, text=True,
                                     check=True).stdout.strip()

    def run(self, command: str, **env) -> subprocess.CompletedProcess:
        key = (command, tuple(sorted(env.items())))
        if key not in self.ran:
            # the session's cache folder (outside the checkout, as a user's home is): what the other tests
            # measured or drew once per install (software versions, the CPU's peak, plots) is not paid again
            # bin/bench told this Python too, as make is: through the .venv link, every library's bytecode
            # would be another path's and compiled again
            full = dict(os.environ, PY=sys.executable, BENCH_PYTHON=sys.executable, **env)
            if "BENCH_COMMIT" not in env:
                full.pop("BENCH_COMMIT", None)
            self.ran[key] = subprocess.run(command, shell=True, cwd=self.root, env=full, capture_output=True,
                                           text=True, timeout=900)
        return self.ran[key]


def count_flops_here(copy: Copy) -> None:
    """The FLOPs counts README's commands would each make in a process of their own, importing torch and
    torchvision for them (5.6 s of the noise-floor example's 17.6 from an empty home), made once here, in a
    process that has imported both, and kept per home as theirs are: each CPU `bin/bench run` case's model
    check (the case read by the command's own parser) and the counts a report re-derives for older records."""
    from bench.cli.flags import case_from_args
    from bench.cli.main import parser
    from bench.harness.checks import check_models
    from bench.present.cases import diagnosis
    from bench.store import query
    runs = [c for c, code in readme_commands() if c.startswith("bin/bench run ") and "--device cpu" in c and code == 0]
    check_models([case_from_args(parser().parse_args(shlex.split(c)[1:])) for c in runs])
    for r in query.load([copy.root / "results"])[0]:
        diagnosis(r)
