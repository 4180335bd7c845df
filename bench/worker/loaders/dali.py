"""NVIDIA DALI: file reader, decode with a random crop, resize, flip and normalise in one pipeline.

One pipeline per process, sharded by global rank under DDP. Under DataParallel the single
process owns one pipeline on the first GPU producing the whole global batch, since DataParallel
scatters its input from that GPU anyway; a pipeline per GPU would need a gather back to it.
"""
from __future__ import annotations

import re
import time

from PIL import Image

from ...data import folder as data
from .common import SkipCase, cores_per_rank
from .normalize import MEAN_255, STD_255

PREFETCH_DEPTH = 2
INSTALL_HINT = "pip install nvidia-dali-cuda130 (CUDA 13) or nvidia-dali-cuda120 (CUDA 12)"


def make_dali_loader(case, ctx):
    try:
        import nvidia.dali  # noqa: F401
    except ImportError:
        raise SkipCase(f"nvidia-dali is not installed; {INSTALL_HINT}") from None
    return DaliLoader(case, ctx)


def _pipeline(case, ctx, files, labels, batch):
    from nvidia.dali import fn, pipeline_def, types

    on_gpu = ctx.device.type == "cuda"

    @pipeline_def(batch_size=batch, num_threads=cores_per_rank(case.dali_threads), seed=case.seed + ctx.rank,
                  device_id=ctx.device.index if on_gpu else None, prefetch_queue_depth=PREFETCH_DEPTH)
    def pipe():
        jpegs, lab = fn.readers.file(files=files, labels=labels, shard_id=ctx.rank if case.strategy == "ddp" else 0,
                                     num_shards=ctx.world_size if case.strategy == "ddp" else 1,
                                     random_shuffle=True, name="Reader")
        decode_kw = {"hw_decoder_load": case.hw_decoder_load} if case.dali_device == "mixed" else {}
        images = fn.decoders.image_random_crop(jpegs, device=case.dali_device, output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4 / 3],
                                               **decode_kw)
        images = fn.resize(images, resize_x=case.image_size, resize_y=case.image_size)
        if on_gpu and case.dali_device == "cpu":
            images = images.gpu()  # decoded on the CPU, normalised on the GPU
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, mean=list(MEAN_255), std=list(STD_255),
                                          output_layout="HWC" if case.channels_last else "CHW",
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, lab.gpu() if on_gpu else lab

    p = pipe()
    p.build()
    return p


class DaliLoader:
    def __init__(self, case, ctx):
        from nvidia.dali.plugin.base_iterator import LastBatchPolicy
        from nvidia.dali.plugin.pytorch import DALIGenericIterator
        folder = data.scan(case.data_dir)
        data.check_size(folder, case)
        self.case = case
        self.pipe = _pipeline(case, ctx, folder.files, folder.labels, case.process_batch)
        self.iterator = DALIGenericIterator([self.pipe], ["images", "labels"], reader_name="Reader",
                                            last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)
        self.device = ctx.device
        self.images = folder.count
        self.files = folder.files
        self.shard = (ctx.rank, ctx.world_size) if case.strategy == "ddp" else (0, 1)
        self.prefetch_batches = PREFETCH_DEPTH
        self.skipped_files = len(folder.skipped)
        self.delivered = 0

    def __iter__(self):
        while True:
            try:
                for out in self.iterator:
                    images = out[0]["images"]
                    if self.case.channels_last:
                        images = images.permute(0, 3, 1, 2)  # NHWC in memory, NCHW to the model: channels_last
                    labels = out[0]["labels"].reshape(-1).long()
                    self.delivered += images.shape[0]
                    yield images, labels.to(self.device, non_blocking=True)
            except RuntimeError as e:
                if not _DECODE_FAILURE.search(str(e)):
                    raise
                raise data.DataError(undecodable(str(e), self.files, self.shard, self.delivered)) from None

    def facts(self) -> dict:
        return {"loader_images": self.images, "non_jpeg_files_skipped": self.skipped_files,
                "loader_threads": cores_per_rank(self.case.dali_threads)}

    def close(self) -> None:
        self.iterator = None
        self.pipe = None


_DECODE_FAILURE = re.compile(r"decod|codec", re.I)


def undecodable(message: str, files: list[str], shard: tuple[int, int], delivered: int) -> str:
    """One line naming the file DALI failed to decode: from DALI's own message where it names one
    (its CPU decoder does), else the first file of this rank's shard that PIL cannot decode either."""
    named = re.search(r"Failed to decode sample #\d+ : (\S+)", message)
    path = named.group(1) if named else _first_undecodable(_shard_files(files, *shard))
    where = f"shard {shard[0]} of {shard[1]}, after {delivered} images delivered"
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    cause = next((ln for ln in lines if _DECODE_FAILURE.search(ln) and "fn." not in ln), lines[0] if lines else "")[:200]
    if path:
        return f"DALI could not decode {path} ({where}): {cause}; remove or replace the file"
    return f"DALI could not decode an image of its shard ({where}), though PIL decodes each of them: {cause}"


def _shard_files(files: list[str], shard_id: int, shards: int) -> list[str]:
    """The files DALI's file reader gives one shard: a contiguous slice of the list."""
    n = len(files)
    return files[n * shard_id // shards: n * (shard_id + 1) // shards]


def _first_undecodable(files: list[str], budget_s: float = 60.0) -> str | None:
    deadline = time.monotonic() + budget_s
    for f in files:
        if time.monotonic() > deadline:
            return None
        try:
            with Image.open(f) as im:
                im.load()
        except Exception:  # any failure to decode is the answer sought
            return f
    return None
