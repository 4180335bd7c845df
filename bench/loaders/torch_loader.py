"""torch DataLoader over a JPEG folder, with the first article's knobs as case fields."""
from __future__ import annotations

from PIL import Image
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision.transforms import v2

from .. import data
from . import process_batch
from .normalize import DeviceNormalize


class JpegFolder(Dataset):
    """ImageFolder over a scanned file list; a file that fails to decode is replaced, not fatal."""

    def __init__(self, folder: data.Folder, image_size: int):
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


class TorchLoader:
    def __init__(self, case, ctx):
        folder = data.scan(case.data_dir)
        data.check_size(folder, case)
        self.dataset = JpegFolder(folder, case.image_size)
        self.sampler = None
        if case.strategy == "ddp":
            self.sampler = DistributedSampler(self.dataset, num_replicas=ctx.world_size, rank=ctx.rank,
                                              shuffle=True, seed=case.seed, drop_last=True)
        workers = case.num_workers
        self.loader = DataLoader(
            self.dataset, batch_size=process_batch(case), sampler=self.sampler, shuffle=self.sampler is None,
            num_workers=workers, pin_memory=case.pin_memory and ctx.device.type == "cuda",
            persistent_workers=case.persistent_workers and workers > 0,
            prefetch_factor=case.prefetch_factor if workers > 0 else None, drop_last=True)
        self.device = ctx.device
        self.non_blocking = case.non_blocking
        self.normalize = DeviceNormalize(ctx.device, case.channels_last)
        self.skipped_files = len(folder.skipped)
        self.corrupt_replaced = 0
        self.prefetch_batches = workers * case.prefetch_factor if workers else 0

    def __iter__(self):
        epoch = 0
        while True:
            if self.sampler is not None:
                self.sampler.set_epoch(epoch)  # a new shuffle per epoch, the same across ranks
            for images, labels, retries in self.loader:
                self.corrupt_replaced += int(retries.sum())
                images = images.to(self.device, non_blocking=self.non_blocking)
                labels = labels.to(self.device, non_blocking=self.non_blocking)
                yield self.normalize(images), labels
            epoch += 1

    def facts(self) -> dict:
        return {"loader_images": len(self.dataset), "non_jpeg_files_skipped": self.skipped_files,
                "corrupt_images_replaced": self.corrupt_replaced}

    def close(self) -> None:
        self.loader = None
