"""The two trees an A/B measures: a commit, checked out into its own git worktree (the suite needs no
build), or a folder holding the suite (for uncommitted changes); each with the variables its
processes get on top of the run's."""
from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import BenchError
from .env import REPO_ROOT, git, tree_state

WORKER = Path("bench") / "worker" / "__main__.py"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class Side:
    name: str
    """`a` or `b`."""
    ref: str
    """What was asked for: a commit (id, branch, tag) or a folder."""
    root: Path
    commit: str
    """Its full commit id; for a folder, the commit its checkout is at ('' where it has none)."""
    dirty: bool
    env: dict = field(default_factory=dict)
    worktree: bool = False
    """Made for this run, removed after it."""

    @property
    def starts_ahead(self) -> bool:
        """Its worker can be started ahead and told to go (`--go`, from this commit on)."""
        try:
            return '"--go"' in (self.root / "bench" / "worker" / "rank.py").read_text()
        except OSError:
            return False

    def label(self) -> str:
        what = f"commit {self.commit[:12]}" if self.worktree else f"folder {self.root}" + (
            f" (at {self.commit[:12]}{', with uncommitted changes' if self.dirty else ''})" if self.commit else "")
        extra = f", with {' '.join(f'{k}={v}' for k, v in sorted(self.env.items()))}" if self.env else ""
        return f"{what}{extra} ({self.ref})" if self.ref not in what else what + extra


def parse_env(items: list[str], flag: str) -> dict:
    """NAME=VALUE pairs given to one side."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not ENV_NAME.match(name):
            raise BenchError(f"{flag} {item!r} is not NAME=VALUE; e.g. {flag} BENCH_INJECT_SLOWDOWN_PCT=3")
        out[name] = value
    return out


def resolve(name: str, ref: str, env: dict, repo: Path = REPO_ROOT) -> Side:
    """The side as asked for, checked (no worktree made yet): a folder with the suite, or a commit of
    `repo` that has it."""
    folder = Path(ref).expanduser()
    if folder.is_dir():
        if not (folder / WORKER).is_file():
            raise BenchError(f"{name.upper()}: folder {ref} holds no suite ({WORKER} is missing); "
                             "accepted: a commit of this repository, or a folder with the suite checked out")
        commit, dirty = tree_state(folder)
        return Side(name, ref, folder.resolve(), commit or "", dirty, env)
    commit = git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], repo)
    if not commit:
        where = "" if git(["rev-parse", "--git-dir"], repo) else f" ({repo} is no git checkout)"
        raise BenchError(f"{name.upper()}: {ref!r} is neither a commit of this repository{where} nor a folder; "
                         "accepted: a commit id, branch or tag, or a folder with the suite checked out")
    if git(["cat-file", "-e", f"{commit}:{WORKER.as_posix()}"], repo) is None:
        raise BenchError(f"{name.upper()}: commit {commit[:12]} has no {WORKER} (it predates the layered suite); "
                         "accepted: commits that have it, or a folder")
    return Side(name, ref, Path(), commit, False, env, worktree=True)


def check_out(sides: list[Side], repo: Path = REPO_ROOT) -> Path:
    """A git worktree for each commit side (one per side, an A/A too), under one temporary folder."""
    base = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    for s in sides:
        if s.worktree:
            s.root = base / f"{s.name}-{s.commit[:12]}"
            if git(["worktree", "add", "--detach", "--quiet", str(s.root), s.commit], repo) is None:
                remove(sides, base, repo)
                raise BenchError(f"{s.name.upper()}: `git worktree add` of {s.commit[:12]} failed in {repo}")
    return base


def remove(sides: list[Side], base: Path, repo: Path = REPO_ROOT) -> None:
    """The worktrees this run made, and their folder."""
    for s in sides:
        if s.worktree and s.root != Path() and s.root.exists():
            git(["worktree", "remove", "--force", str(s.root)], repo)
    git(["worktree", "prune"], repo)
    shutil.rmtree(base, ignore_errors=True)
