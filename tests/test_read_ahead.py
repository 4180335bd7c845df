"""Reading the worker's imports and libraries ahead: which files, that bytecode lands in the cache, and
that a sweep's data generation runs beside it and nothing comes after it before it ends."""
import sys

from bench.cli import sweep as sweepcmd
from bench.harness.read_ahead import ReadAhead
from bench.worker import read_ahead


def test_library_files_take_package_folders_mapped_libraries_and_their_families(tmp_path):
    pkg = tmp_path / "site" / "fakepkg"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "lib" / "libfake.so.1").write_bytes(b"x" * 10)
    system = tmp_path / "usr_lib"
    system.mkdir()
    for name in ("libcudnn.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_ops.so.9", "libother.so.1"):
        (system / name).write_bytes(b"y" * 100)
    maps = tmp_path / "maps"
    maps.write_text(f"7f00-7f10 r-xp 00000000 08:01 42 {system / 'libcudnn.so.9'}\n"
                    "7f20-7f30 rw-p 00000000 00:00 0 [heap]\n"
                    f"7f40-7f50 r--p 00000000 08:01 43 {tmp_path / 'data.bin'}\n")
    sys.path.insert(0, str(tmp_path / "site"))
    try:
        files = read_ahead.library_files(("fakepkg", "no_such_package"), maps=str(maps))
    finally:
        sys.path.remove(str(tmp_path / "site"))
    names = sorted(p.name for p in files)
    # the mapped cuDNN brings the family it opens on first use, not its unrelated neighbour
    assert names == ["libcudnn.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_ops.so.9", "libfake.so.1"]
    # a file named twice (a link, overlapping folders) is read once
    link = system / "libcudnn.so"
    link.symlink_to(system / "libcudnn.so.9")
    assert read_ahead.read_libraries([*files, link, system / "libcudnn.so.9"]) == (310, 4)


def test_read_ahead_imports_into_the_bytecode_cache_and_reports(tmp_path):
    prefix = tmp_path / "pycache"
    ahead = ReadAhead(("json", "no_such_module_here"), env={"PYTHONPYCACHEPREFIX": str(prefix)})
    line = ahead.finish()
    assert line.startswith("read ahead: json imported, ")
    assert "no_such_module_here" not in line
    assert any(prefix.rglob("json/__init__*.pyc")), "the import's bytecode was written to the cache"
    assert ahead.finish() == ""  # once


def test_read_ahead_can_be_turned_off_and_a_failure_is_said(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_READ_AHEAD", "0")
    assert ReadAhead(("json",)).finish() == ""
    monkeypatch.delenv("BENCH_READ_AHEAD")
    # started from a folder without the suite: the module is not found
    broken = ReadAhead(("json",), root=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert broken.finish().startswith("reading ahead failed (exit 1)")


def test_a_gpu_sweep_makes_its_data_beside_the_read_ahead_and_waits_for_it(tmp_path, monkeypatch, capsys):
    events = []

    class Ahead:
        def __init__(self):
            events.append("start")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            events.append("exit")

        def finish(self):
            events.append("finish")
            return "read ahead: torch imported"

    monkeypatch.setattr(sweepcmd, "ReadAhead", Ahead)
    monkeypatch.setattr(sweepcmd, "ensure_default_data", lambda folder, n: events.append(f"data {n}"))
    monkeypatch.setattr(sweepcmd.sweeps, "images_needed", lambda cases: 4096)
    sweepcmd.prepare("cuda", str(tmp_path), [])
    assert events == ["start", "data 4096", "finish", "exit"]
    assert "read ahead: torch imported" in capsys.readouterr().out
    events.clear()
    sweepcmd.prepare("cpu", str(tmp_path), [])  # a CPU run has no cold GPU libraries to hide
    sweepcmd.prepare("cuda", "", [])  # a folder given by the user: nothing to make, still read ahead
    assert events == ["data 4096", "start", "finish", "exit"]

