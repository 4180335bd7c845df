"""Started by the harness (`python -m bench.worker.prime [MODULES...]`, or worker/prime_steps.py where a
reference case is given) while it has other work, such as making the data folder, and ended before anything
is measured. It pays once, unmeasured, for what the first process on a fresh machine would otherwise pay in its
first phases:
- the imports a worker makes, so their bytecode is in the cache (one H200 image ships none);
- matplotlib's font cache, which the report would otherwise build at the end of the run;
- the shared libraries behind them read into the page cache (in a thread, beside the rest);
- on a GPU, the reference case's first steps: on one H200 machine straight after start, the first
  measured process paid about 11 s more in its first step than the processes after it.
Prints one JSON line: what it imported, read and ran, the software versions, and its seconds."""
from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import threading
import time
from pathlib import Path

from ..core import software

MODULES = ("torch", "torchvision", "nvidia.dali", "nvidia", "matplotlib.font_manager")
"""nvidia: the namespace of the CUDA wheels (cuDNN, cuBLAS, NCCL); importing matplotlib's font
manager builds its font cache."""
CHUNK = 8 << 20


def library_files(modules=MODULES, maps: str = "/proc/self/maps") -> list[Path]:
    """The shared libraries behind the imported modules: everything under the packages' folders, the
    libraries this process has mapped (an image may keep CUDA's outside site-packages), and beside each
    of those its family (libcudnn* next to libcudnn.so.9), which such libraries open only on first use."""
    files, families = [], set()
    for name in modules:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for loc in (spec.submodule_search_locations or []) if spec else []:
            files += Path(loc).rglob("*.so*")
    try:
        mapped = {Path(line.split()[-1]) for line in Path(maps).read_text().splitlines()
                  if ".so" in line.rsplit("/", 1)[-1] and line.split()[-1].startswith("/")}
    except OSError:
        mapped = set()
    for lib in mapped:
        families.add((lib.parent, lib.name.split(".so")[0].split("_")[0]))
    for folder, family in sorted(families):
        files += folder.glob(f"{family}*.so*")
    return files


def read_libraries(files: list[Path]) -> tuple[int, int]:
    """Read each file once (links and overlapping folders name some twice); (bytes, files)."""
    seen, total = set(), 0
    for path in files:
        real = path.resolve()
        if real in seen or not real.is_file():
            continue
        seen.add(real)
        try:
            with open(real, "rb", buffering=0) as f:
                while chunk := f.read(CHUNK):
                    total += len(chunk)
        except OSError:
            continue  # unreadable: that file stays cold
    return total, len(seen)


def main(modules=MODULES, then=None) -> dict:
    """Import `modules` and read their libraries; `then(out)`, where given, runs beside the reads and adds its
    facts to `out`. Imports no torch where `modules` do not."""
    t = time.perf_counter()
    imported = []
    for name in modules:
        try:
            importlib.import_module(name)
            imported.append(name)
        except Exception:  # noqa: BLE001 - an optional package (DALI) missing is no reason to stop
            continue
    out = {"imported": imported}
    reader = threading.Thread(target=lambda: out.update(zip(("bytes", "files"),
                                                            read_libraries(library_files(modules)))))
    reader.start()  # file reads release the GIL: the disk works while the steps below run
    if "torch" in imported:
        out["software"] = software.versions()
    if then is not None:
        then(out)
    reader.join()
    out["seconds"] = time.perf_counter() - t
    return out


if __name__ == "__main__":
    print(json.dumps(main(tuple(sys.argv[1:]) or MODULES)), flush=True)
