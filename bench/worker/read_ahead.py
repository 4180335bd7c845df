"""Started by the harness (`python -m bench.worker.read_ahead`) while it has other work, such as making
the data folder: imports what a worker imports, so its bytecode is written to the cache, and reads the
shared libraries behind them into the page cache. On one H200 machine, straight after start, the first
measured process paid about 10 s more in its first step than the next ones (libraries read from a
cold disk). Prints one JSON line: bytes read, files and seconds. Touches no GPU."""
from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import time
from pathlib import Path

MODULES = ("torch", "torchvision", "nvidia.dali", "nvidia")  # nvidia: the namespace of the CUDA wheels
CHUNK = 8 << 20


def library_files(modules=MODULES, maps: str = "/proc/self/maps") -> list[Path]:
    """The shared libraries behind the imported modules: everything under the packages' folders and
    of `nvidia` (cuDNN, cuBLAS, NCCL wheels) where it is named, the libraries this process has mapped (an
    image may keep CUDA's outside site-packages), and beside each of those its family (libcudnn*
    next to libcudnn.so.9), which such libraries open only on first use."""
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


def main(modules=MODULES) -> dict:
    t = time.perf_counter()
    imported = []
    for name in modules:
        try:
            importlib.import_module(name)
            imported.append(name)
        except Exception:  # an optional package (DALI) missing is no reason to stop
            pass
    bytes_read, files = read_libraries(library_files(modules))
    return {"imported": imported, "bytes": bytes_read, "files": files, "seconds": time.perf_counter() - t}


if __name__ == "__main__":
    print(json.dumps(main(tuple(sys.argv[1:]) or MODULES)), flush=True)
