"""ImageNet-like JPEG folders, made deterministically and resumably.

Generated images cost what ImageNet training images cost to decode: mixed sizes around 500x375,
baseline JPEG, about 110 KB, with content whose spectrum falls off like a photograph's (1/f
amplitude) plus hard-edged shapes, so neither flat colour nor white noise skews decode time.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import os
import signal
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..core.errors import DataError
from ..core.files import atomic_path

QUALITY = 93  # with the content below this gives a mean near 110 KB at ~500x375


def _rng(seed: int, index: int) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _pink_field(rng: np.random.Generator, h: int, w: int, alpha: float) -> np.ndarray:
    """Noise with amplitude falling as 1/f^alpha, scaled to [0, 1]."""
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    f = np.sqrt(fx * fx + fy * fy)
    f[0, 0] = 1.0
    spectrum = (rng.standard_normal(f.shape) + 1j * rng.standard_normal(f.shape)) / f ** alpha
    spectrum[0, 0] = 0
    img = np.fft.irfft2(spectrum, s=(h, w))
    img -= img.min()
    return img / (img.max() + 1e-12)


def render_image(seed: int, index: int):
    """One deterministic natural-looking RGB image of ImageNet-like size."""
    rng = _rng(seed, index)
    w = int(rng.choice([500, 500, 500, 375, 400, 450, 640, 333]))
    h = int(rng.choice([375, 375, 333, 500, 300, 400, 480])) if w != 375 else 500
    # three correlated channels: a shared luminance field and weaker colour fields
    lum = _pink_field(rng, h, w, 1.0)
    rgb = np.stack([0.75 * lum + 0.25 * _pink_field(rng, h, w, 1.2) for _ in range(3)], axis=-1)
    rgb = rgb * rng.uniform(0.6, 1.0, size=3) + rng.uniform(0.0, 0.3, size=3)
    # fine texture, as in foliage, fur or fabric
    rgb += rng.normal(0, 0.06, size=rgb.shape)
    texture = Image.fromarray((np.clip(rgb, 0, 1) * 255).astype(np.uint8), "RGB")
    shapes = texture.copy()
    draw = ImageDraw.Draw(shapes)
    for _ in range(int(rng.integers(3, 9))):  # objects with hard edges
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(20, w // 2)), y0 + int(rng.integers(20, h // 2))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=colour)
    return Image.blend(texture, shapes, 0.6)  # objects keep the texture, as lit surfaces do


def image_path(out: Path, index: int, classes: int) -> Path:
    return out / f"class_{index % classes:04d}" / f"img_{index:08d}.jpg"


def _write_one(args) -> int:
    out, index, classes, seed = args
    path = image_path(Path(out), index, classes)
    if path.is_file() and path.stat().st_size > 0:
        return path.stat().st_size  # resume: finished files are kept
    img = render_image(seed, index)
    with atomic_path(path, fsync=False) as tmp:  # a generated image can be made again
        img.save(tmp, "JPEG", quality=QUALITY, progressive=False, optimize=False, subsampling=2)
    return path.stat().st_size


@contextlib.contextmanager
def progress_bar(what: str, total: int):
    """A bar with the rate and time left on stderr (rich, the progress library used everywhere here);
    yields a function that advances it by one."""
    with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TextColumn("time left"), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(what, total=total)
        yield lambda: bar.advance(task)


def _quiet_worker() -> None:
    """Pool workers stop quietly on the signals the command line turns into a clean stop; the parent
    reports the stop once."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def classes_for(images: int) -> int:
    """Class folders for a generated set: ImageNet-like (up to 100), about ten images each for small sets."""
    return max(1, min(100, images // 10))


def make_dataset(out: Path, images: int, classes: int | None = None, seed: int = 0, workers: int | None = None,
                 echo=print) -> dict:
    classes = classes or classes_for(images)
    if images < 1 or classes < 1 or classes > images:
        raise DataError(f"--images={images} --classes={classes}: need images >= classes >= 1")
    out = Path(out)
    for c in range(classes):
        (out / f"class_{c:04d}").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    jobs = [(str(out), i, classes, seed) for i in range(images)]
    workers = workers or os.cpu_count() or 1
    with Pool(workers, initializer=_quiet_worker) as pool, progress_bar(f"writing {images} JPEGs", images) as advance:
        sizes = []
        for size in pool.imap_unordered(_write_one, jobs, chunksize=max(1, min(64, images // (workers * 8)))):
            sizes.append(size)
            advance()
        pool.close()
        pool.join()
    took = time.monotonic() - started
    summary = {"images": images, "classes": classes, "mean_bytes": sum(sizes) / len(sizes),
               "seconds": took, "workers": workers, "folder": str(out)}
    echo(f"{images} JPEGs in {classes} classes under {out}: mean {summary['mean_bytes'] / 1000:.1f} KB, "
         f"{took:.1f} s on {workers} worker(s)")
    return summary


def make_dataset_of_size(out: Path, target_bytes: int, classes: int | None = None, seed: int = 0,
                         workers: int | None = None, echo=print) -> dict:
    """A set of at least `target_bytes` (larger than a host's memory, so warm reads cannot all come from
    its page cache): as many images as the mean size asks, more where the mean fell short."""
    classes = classes or 100  # fixed from the start: a resumed set keeps every file in its class folder
    images = max(classes, math.ceil(target_bytes / 100_000))
    while True:
        summary = make_dataset(out, images, classes, seed, workers, echo)
        total = summary["mean_bytes"] * images
        if total >= target_bytes:
            return {**summary, "bytes": total}
        images = math.ceil(images * target_bytes / total) + 1
