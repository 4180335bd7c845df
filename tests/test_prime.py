"""Priming the machine: which libraries are read, that bytecode lands in the cache, that the reference
case's first steps run and the software versions reach the run's environment, and that a sweep's data
generation runs beside it and nothing comes after it before it ends."""
import json
import sys
from pathlib import Path

import pytest

from bench.cli import sweep as sweepcmd
from bench.core.case import Case
from bench.harness import env as envmod
from bench.harness.prime import Prime
from bench.worker import prime, prime_steps


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
        files = prime.library_files(("fakepkg", "no_such_package"), maps=str(maps))
    finally:
        sys.path.remove(str(tmp_path / "site"))
    names = sorted(p.name for p in files)
    # the mapped cuDNN brings the family it opens on first use, not its unrelated neighbour
    assert names == ["libcudnn.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_ops.so.9", "libfake.so.1"]
    # a file named twice (a link, overlapping folders) is read once
    link = system / "libcudnn.so"
    link.symlink_to(system / "libcudnn.so.9")
    assert prime.read_libraries([*files, link, system / "libcudnn.so.9"]) == (310, 4)


@pytest.mark.slow
def test_prime_imports_into_the_bytecode_cache_and_reports(tmp_path):
    # the session's own cache where it has one (a fresh one would compile all of torch's bytecode first),
    # without json's, so that the primer writes it
    import os
    prefix = Path(os.environ.get("PYTHONPYCACHEPREFIX") or tmp_path / "pycache")
    # where the interpreter keeps json's bytecode under that prefix: named, not searched for (a walk of a
    # cache holding all of torch's bytecode took most of this test's 15 s)
    pyc = prefix / Path(json.__file__).parent.relative_to("/") / f"__init__.{sys.implementation.cache_tag}.pyc"
    pyc.unlink(missing_ok=True)
    primer = Prime(modules=("json", "no_such_module_here"),
                   env={"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": ""})
    line = primer.finish()
    assert line.startswith("primed (unmeasured): json imported; ")
    assert "no_such_module_here" not in line and "first steps" not in line
    assert pyc.is_file(), "the import's bytecode was written to the cache"
    assert primer.finish() == ""  # once


@pytest.mark.slow
def test_prime_runs_the_reference_case_first_steps_and_hands_over_the_versions(monkeypatch, tmp_path):
    monkeypatch.setattr(envmod, "_KNOWN_SOFTWARE", {})
    tiny = Case(device="cpu", name="noise-floor", model="resnet18", num_classes=10, batch_size=2, image_size=32)
    line = Prime(tiny, modules=("torch",)).finish()
    assert "first steps of noise-floor: " in line and "failed" not in line
    steps = line.split("first steps of noise-floor: ")[1].split(";")[0].split(", ")
    assert len(steps) == 2 and all(s.endswith(" s") and float(s[:-2]) >= 0 for s in steps)
    import torch
    assert envmod.software_versions()["torch"] == torch.__version__  # read by the primer, kept here
    if not torch.cuda.is_available():  # a case that cannot run here: the primer says why, the run goes on
        monkeypatch.setattr(prime, "library_files", lambda modules: [])  # this process maps all of torch's
        facts = prime_steps.main(json.dumps(tiny.replace(device="cuda").to_dict()), ("json",))
        assert facts["first_steps_error"].startswith("RuntimeError: device='cuda' but torch sees no CUDA GPU")
        # what the primer's process printed, said in one line (a stand-in module prints these facts)
        stand_in = tmp_path / "bench" / "worker"
        stand_in.mkdir(parents=True)
        for package in (tmp_path / "bench", stand_in):
            (package / "__init__.py").write_text("")
        (stand_in / "prime_steps.py").write_text(f"print({json.dumps(json.dumps(facts))})\n")
        line = Prime(tiny.replace(device="cuda"), modules=("json",), root=tmp_path,
                     env={"PYTHONPATH": str(tmp_path)}).finish()
        assert "first steps of noise-floor failed (RuntimeError: device='cuda' but torch sees no CUDA GPU" in line


def test_prime_can_be_turned_off_and_a_failure_is_said(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_PRIME", "0")
    assert Prime(modules=("json",)).finish() == ""
    monkeypatch.delenv("BENCH_PRIME")
    # started from a folder without the suite: the module is not found
    broken = Prime(modules=("json",), root=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert broken.finish().startswith("priming failed (exit 1)")


def test_a_gpu_sweep_primes_the_machine_beside_its_data_generation_and_waits_for_it(tmp_path, monkeypatch, capsys):
    events = []

    class Primer:
        def __init__(self, reference):
            events.append(f"start {reference}")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            events.append("exit")

        def finish(self):
            events.append("finish")
            return "primed (unmeasured): torch imported"

    monkeypatch.setattr(sweepcmd, "Prime", Primer)
    monkeypatch.setattr(sweepcmd, "ensure_default_data", lambda folder, n: events.append(f"data {n}"))
    monkeypatch.setattr(sweepcmd.sweeps, "images_needed", lambda cases: 4096)
    short = {"value": True}
    monkeypatch.setattr(sweepcmd, "default_data_short", lambda folder, n: short["value"])
    sweepcmd.prepare("cuda", str(tmp_path), [], "ref")
    assert events == ["start ref", "data 4096", "finish", "exit"]
    assert "primed (unmeasured): torch imported" in capsys.readouterr().out
    events.clear()
    sweepcmd.prepare("cpu", str(tmp_path), [], "ref")  # the CPU path has no cold GPU to prime
    assert events == ["data 4096"]
    events.clear()
    sweepcmd.prepare("cuda", "", [], "ref")  # a folder given by the user: nothing to make, nothing to hide behind
    short["value"] = False
    sweepcmd.prepare("cuda", str(tmp_path), [], "ref")  # made before: this machine paid for its cold start then
    assert events == []

