"""torch DataLoader over a JPEG folder, with the first article's knobs as case fields."""
from __future__ import annotations

import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler, Sampler

from ...data import folder as data
from .common import cores_per_rank
from .normalize import DeviceNormalize


class JpegFolder(Dataset):
    """ImageFolder over a scanned file list; a file that fails to decode is replaced, not fatal."""

    def __init__(self, folder: data.Folder, image_size: int):
        # here, not at the top: torchvision's import costs a second or more (it imports torch._dynamo),
        # which a DALI rank or a loader-only rank of `bench feed` has no use for
        from torchvision.transforms import v2
        self.files, self.labels = folder.files, folder.labels
        # uint8 crops leave the worker; conversion and normalisation happen on the device
        self.transform = v2.Compose([v2.RandomResizedCrop(image_size, antialias=True), v2.RandomHorizontalFlip(),
                                     v2.PILToTensor()])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        for attempt in range(len(self.files)):
            j = (i + attempt) % len(self.files)
            try:
                with Image.open(self.files[j]) as im:
                    img = im.convert("RGB")
                return self.transform(img), self.labels[j], attempt
            except (OSError, ValueError):
                continue  # counted through `attempt`: a corrupt file is skipped, never a crash
        raise RuntimeError("no decodable image in the data folder")


class EpochAfterEpoch(Sampler):
    """The inner sampler's indices, epoch after epoch with a new shuffle each (set_epoch under DDP),
    as one endless stream. A DataLoader whose sampler ends makes a new iterator per epoch, and its
    workers start their first batches of the next epoch only then: a stall of one batch's decoding.
    On ImageNet that is once in thousands of steps; on a small generated folder it would land in
    every measured window, so the workers stream across epochs instead."""

    def __init__(self, inner):
        self.inner = inner
        self.epochs_started = 0

    def __iter__(self):
        epoch = 0
        while True:
            if hasattr(self.inner, "set_epoch"):
                self.inner.set_epoch(epoch)  # the same shuffle on every rank, a new one per epoch
            self.epochs_started = epoch + 1
            yield from self.inner
            epoch += 1


DTYPE_NAMES = {torch.float32: "float", torch.float16: "float16", torch.uint8: "uint8"}
"""The dtype a batch was delivered in, in the names the `loader_dtype` fact has in DALI's records."""


class TorchLoader:
    def __init__(self, case, ctx):
        folder = data.scan(case.data_dir)
        data.check_size(folder, case)
        self.dataset = JpegFolder(folder, case.image_size)
        self.files = folder.files
        if case.strategy == "ddp":
            per_epoch = DistributedSampler(self.dataset, num_replicas=ctx.world_size, rank=ctx.rank,
                                           shuffle=True, seed=case.seed, drop_last=True)
        else:
            per_epoch = RandomSampler(self.dataset, generator=torch.Generator().manual_seed(case.seed))
        self.sampler = EpochAfterEpoch(per_epoch)
        workers = cores_per_rank(case.num_workers)
        self.loader = DataLoader(
            self.dataset, batch_size=case.process_batch, sampler=self.sampler,
            num_workers=workers, pin_memory=case.pin_memory and ctx.device.type == "cuda",
            persistent_workers=case.persistent_workers and workers > 0,
            prefetch_factor=case.prefetch_factor if workers > 0 else None, drop_last=True)
        self.device = ctx.device
        self.non_blocking = case.non_blocking
        # a CPU rank standing in for a GPU rank leaves the float conversion to the GPU it stands in for
        self.normalize = None if case.host_side_only else DeviceNormalize(ctx.device, case.channels_last,
                                                                          case.input_channels)
        self.delivered_dtype = None
        self.skipped_files = len(folder.skipped)
        self.corrupt_replaced = 0
        self.prefetch_batches = workers * case.prefetch_factor if workers else 0
        self.workers = workers
        self.input_wait_s = 0.0  # seconds spent blocked on the workers, read by the trainer

    def __iter__(self):
        batches = iter(self.loader)
        while True:
            t = time.perf_counter()
            images, labels, retries = next(batches)
            self.input_wait_s += time.perf_counter() - t
            self.corrupt_replaced += int(retries.sum())
            # a blocking copy waits for the GPU's queued work first: that is compute, not input,
            # so only the wait for the workers above counts as waiting for data
            images = images.to(self.device, non_blocking=self.non_blocking)
            labels = labels.to(self.device, non_blocking=self.non_blocking)
            images = self.normalize(images) if self.normalize else images
            self.delivered_dtype = DTYPE_NAMES.get(images.dtype, str(images.dtype))
            yield images, labels

    def facts(self) -> dict:
        return {"loader_images": len(self.dataset), "non_jpeg_files_skipped": self.skipped_files,
                "corrupt_images_replaced": self.corrupt_replaced, "loader_epochs_started": self.sampler.epochs_started,
                "loader_threads": self.workers, "loader_dtype": self.delivered_dtype}

    def close(self) -> None:
        self.loader = None
