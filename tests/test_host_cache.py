"""Facts an install decides, read once and kept outside the repository: the same key reads them back,
another key or a changed install counts again, and a folder that cannot be written only costs time."""
import json
import os
import subprocess
import sys

from bench.core import host_cache
from conftest import ROOT


def test_a_fact_is_computed_once_per_key(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path))
    calls = []

    def compute(v):
        calls.append(v)
        return {"v": v}
    assert host_cache.remembered("k", {"a": 1}, lambda: compute(1)) == {"v": 1}
    assert host_cache.remembered("k", {"a": 1}, lambda: compute(2)) == {"v": 1}  # read back
    assert host_cache.remembered("k", {"a": 2}, lambda: compute(3)) == {"v": 3}  # another key
    assert calls == [1, 3]
    (kept,) = [p for p in (tmp_path / "facts").glob("k-*.json") if json.loads(p.read_text())["key"] == {"a": 1}]
    kept.write_text("{not json")  # a torn or foreign file is computed again, never trusted
    assert host_cache.remembered("k", {"a": 1}, lambda: compute(4)) == {"v": 4} and calls == [1, 3, 4]


def test_an_unwritable_cache_only_computes_again(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BENCH_DATA_CACHE", str(blocker))
    assert host_cache.remembered("k", {"a": 1}, lambda: 5) == 5
    assert host_cache.remembered("k", {"a": 1}, lambda: 6) == 6


def test_a_reinstalled_module_changes_the_key(tmp_path, monkeypatch):
    module = tmp_path / "fake_pkg.py"
    module.write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = host_cache.install_key("fake_pkg", "no_such_module_here")
    assert before["no_such_module_here"] is None and before["fake_pkg"][0] == str(module)
    os.utime(module, ns=(1, 1))
    assert host_cache.install_key("fake_pkg")["fake_pkg"] != before["fake_pkg"]


def test_the_software_versions_cost_torch_once_per_install(tmp_path):
    probe = ("import sys; from bench.core import software; v = software.versions(); "
             "print(v['torch'], 'torch' in sys.modules)")
    env = dict(os.environ, BENCH_DATA_CACHE=str(tmp_path))
    outs = [subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=120).stdout.split() for _ in range(2)]
    import torch
    assert outs == [[torch.__version__, "True"], [torch.__version__, "False"]]
