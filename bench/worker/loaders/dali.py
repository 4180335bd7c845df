"""NVIDIA DALI: file reader, decode with a random crop, resize, flip and normalise in one pipeline.

One pipeline per process, sharded by global rank under DDP. Under DataParallel the single
process owns one pipeline on the first GPU producing the whole global batch, since DataParallel
scatters its input from that GPU anyway; a pipeline per GPU would need a gather back to it.
"""
from __future__ import annotations

import re
import time

from PIL import Image

from ...core.software import DALI_INSTALL
from ...data import folder as data
from .common import SkipCase, cores_per_rank, dtype_fact, half_input
from .normalize import MEAN_255, STD_255


def make_dali_loader(case, ctx):
    try:
        import nvidia.dali  # noqa: F401
    except ImportError:
        raise SkipCase(f"nvidia-dali is not installed; {DALI_INSTALL}") from None
    return DaliLoader(case, ctx)


# GPUs with hardware JPEG engines (NVJPG), by the name torch reports. DALI sends them `hw_decoder_load`
# of each batch and decodes the rest on the SMs; on one H200 the loader alone delivered 18,027 images/s
# at DALI's 0.65, 21,403 at 0.99 and 20,332 at 1.0 (the CPU's share of the Huffman work keeps a sliver)
HW_JPEG_GPUS = ("A100", "A800", "A30", "H100", "H800", "H200", "H20", "GH200", "B100", "B200", "GB200")
HW_JPEG_SHARE = 0.99
DALI_DEFAULT_SHARE = 0.65


def hw_decoder_share(requested: float, gpu_name: str) -> tuple[float, str]:
    """(share, why): as the case asks, or (-1) chosen for this GPU."""
    if requested != -1:
        return requested, "set by the case"
    if re.search(r"\b(" + "|".join(HW_JPEG_GPUS) + r")\b", gpu_name):
        return HW_JPEG_SHARE, f"{gpu_name} has hardware JPEG decoders: nearly every image to them"
    return DALI_DEFAULT_SHARE, f"{gpu_name or 'this GPU'} is not known to have hardware JPEG decoders: DALI's default"


CROP_WINDOW = {"random_area": [0.08, 1.0], "random_aspect_ratio": [0.75, 4 / 3]}
"""The random crop's area share and aspect ratio, as torchvision's RandomResizedCrop draws them."""


def output_dtype(precision: str, on_gpu: bool) -> str:
    """DALI's name of the dtype the model consumes first (common.half_input)."""
    return "FLOAT16" if half_input(precision, on_gpu) else "FLOAT"


def split_batch(batch: int, cpu_share: float) -> tuple[int, int]:
    """(images a batch takes from the GPU-decoding pipeline, from the CPU-decoding one)."""
    cpu = round(batch * cpu_share)
    return batch - cpu, cpu


def split_files(files: list, labels: list, cpu_share: float) -> tuple[tuple[list, list], tuple[list, list]]:
    """The folder's files for each pipeline, ((files, labels) decoded on the GPU, on the CPU): the CPU's
    `cpu_share` spread evenly over the sorted list, so both see every class."""
    to_cpu = [int((i + 1) * cpu_share) > int(i * cpu_share) for i in range(len(files))]
    parts = ([], [], [], [])
    for f, lab, cpu in zip(files, labels, to_cpu):
        parts[2 * cpu].append(f)
        parts[2 * cpu + 1].append(lab)
    return (parts[0], parts[1]), (parts[2], parts[3])


def split_threads(total: int) -> tuple[int, int]:
    """(threads of the GPU-decoding pipeline, of the CPU-decoding one) out of a rank's `total`: the hardware
    decoders need few host threads (on one H200 DALI alone delivered 18,028.7 images/s on 4), a CPU decoder
    one per core; one core stays with the thread that queues the step."""
    gpu = min(4, max(1, total // 4))
    return gpu, max(1, total - gpu - 1)


def _pipeline(case, ctx, files, labels, batch, share, decode_device=None, threads=None, second=False):
    """One DALI pipeline; `decode_device` and `threads` default to the case's (a split's second pipeline
    decodes on the CPU with threads of its own, and draws its crops from seeds no rank's first one uses)."""
    from nvidia.dali import fn, pipeline_def, types

    on_gpu = ctx.device.type == "cuda"
    decode_device = decode_device or case.dali_device
    seed = case.seed + ctx.rank + (ctx.world_size if second else 0)

    @pipeline_def(batch_size=batch, num_threads=threads or cores_per_rank(case.dali_threads), seed=seed,
                  device_id=ctx.device.index if on_gpu else None, prefetch_queue_depth=case.dali_prefetch_depth)
    def pipe():
        jpegs, lab = fn.readers.file(files=files, labels=labels, shard_id=ctx.rank if case.strategy == "ddp" else 0,
                                     num_shards=ctx.world_size if case.strategy == "ddp" else 1,
                                     random_shuffle=True, name="Reader",
                                     # cold reads: plain reads, since pages a reader keeps mapped stay cached
                                     dont_use_mmap=case.cold_reads)
        decode_kw = {"hw_decoder_load": share} if decode_device == "mixed" else {}
        if case.dali_crop == "decoder":  # the decoder reads only the random crop's region of each JPEG
            images = fn.decoders.image_random_crop(jpegs, device=decode_device, output_type=types.RGB,
                                                   **CROP_WINDOW, **decode_kw)
            images = fn.resize(images, resize_x=case.image_size, resize_y=case.image_size)
        else:  # whole images decoded, then the same random window cut and resized by one operator
            images = fn.decoders.image(jpegs, device=decode_device, output_type=types.RGB, **decode_kw)
            images = fn.random_resized_crop(images, size=[case.image_size, case.image_size], **CROP_WINDOW)
        if on_gpu and decode_device == "cpu":
            images = images.gpu()  # decoded on the CPU, normalised on the GPU
        images = fn.crop_mirror_normalize(images, dtype=getattr(types, output_dtype(case.precision, on_gpu)), mean=list(MEAN_255), std=list(STD_255),
                                          output_layout="HWC" if case.channels_last else "CHW",
                                          # a zero fourth channel (DALI pads to 4) where the model reads one
                                          pad_output=case.input_channels == 4,
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, lab.gpu() if on_gpu else lab

    p = pipe()
    p.build()
    return p


class DaliLoader:
    def __init__(self, case, ctx):
        folder = data.scan(case.data_dir)
        data.check_size(folder, case)
        self.case = case
        gpu_name = torch_gpu_name(ctx.device)
        self.share, self.share_why = hw_decoder_share(case.hw_decoder_load, gpu_name)
        self.device = ctx.device
        self.handoff = handoff_used(case, ctx.device)
        threads = cores_per_rank(case.dali_threads)
        if case.dali_cpu_share > 0:  # two pipelines, each a part of every batch, joined on the device
            self.batches, self.threads = split_batch(case.process_batch, case.dali_cpu_share), split_threads(threads)
            parts = split_files(folder.files, folder.labels, case.dali_cpu_share)
            self.pipes = [_pipeline(case, ctx, *part, batch, self.share, device, t, second)
                          for part, batch, device, t, second
                          in zip(parts, self.batches, (case.dali_device, "cpu"), self.threads, (False, True))]
        else:
            self.batches, self.threads = (case.process_batch,), (threads,)
            self.pipes = [_pipeline(case, ctx, folder.files, folder.labels, case.process_batch, self.share)]
        self.iterators = [self._iterator(p) for p in self.pipes]
        self.images = folder.count
        self.files = folder.files
        # a split reads its own lists of the files: a decode failure is looked for in all of them
        self.shard = (ctx.rank, ctx.world_size) if case.strategy == "ddp" and len(self.pipes) == 1 else (0, 1)
        self.prefetch_batches = case.dali_prefetch_depth
        self.skipped_files = len(folder.skipped)
        self.delivered = 0

    def _iterator(self, pipe):
        from nvidia.dali.plugin.base_iterator import LastBatchPolicy
        from nvidia.dali.plugin.pytorch import DALIGenericIterator
        if self.handoff == "stream":
            return StreamHandoff(pipe, self.device)
        return DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader",
                                   last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)

    def __iter__(self):
        streams = [_epochs(it) for it in self.iterators]
        while True:
            try:
                outs = [next(s)[0] for s in streams]  # DALI's iterator: one dict per pipeline
            except RuntimeError as e:
                if not _DECODE_FAILURE.search(str(e)):
                    raise
                raise data.DataError(undecodable(str(e), self.files, self.shard, self.delivered)) from None
            images, labels = (_joined([o[name] for o in outs]) for name in ("images", "labels"))
            if self.case.channels_last:
                images = images.permute(0, 3, 1, 2)  # NHWC in memory, NCHW to the model: channels_last
            self.delivered += images.shape[0]
            yield images, labels.reshape(-1).long().to(self.device, non_blocking=True)

    def facts(self) -> dict:
        facts = {"loader_images": self.images, "non_jpeg_files_skipped": self.skipped_files,
                 "loader_threads": self.threads[0],
                 "loader_dtype": dtype_fact(half_input(self.case.precision, self.device.type == "cuda")),
                 "loader_handoff": self.handoff, "loader_crop": self.case.dali_crop}
        if self.case.dali_device == "mixed":
            facts.update(hw_decoder_load_used=self.share, hw_decoder_load_why=self.share_why)
        if len(self.pipes) > 1:
            facts.update(loader_cpu_batch=self.batches[1], loader_cpu_threads=self.threads[1])
        return facts

    def close(self) -> None:
        self.iterators = []
        self.pipes = []


def _epochs(iterator):
    """A DALI iterator read epoch after epoch (its own iterator stops at each epoch's end and resets)."""
    while True:
        yield from iterator


def _joined(parts: list):
    """One pipeline's tensor as it is; a split's parts, one after the other along the batch."""
    import torch
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def handoff_used(case, device) -> str:
    """`stream` only where there is a CUDA stream to bind DALI's outputs to; on the CPU the host takes them."""
    return case.dali_handoff if device.type == "cuda" else "host"


class StreamHandoff:
    """DALI's outputs bound to the training stream (`dali_handoff='stream'`): `Pipeline.run(stream)`
    returns once the batch is scheduled, and its copy into torch's tensors is queued on that stream
    behind DALI's ready event, so the host queues the step without waiting for DALI's GPU work. DALI's
    PyTorch iterator (`host`) asks for host-synchronous outputs instead. On one H200 the stream did not
    help (one process each): a compiled step fed through it ran 6,118 images/s, idle for input 15% of
    its windows, against 6,326 and 12% with the host waiting; in both the host waited for DALI 58-67% of
    the time. The reader streams epoch after epoch.

    It yields what DALI's iterator yields (a list of one {name: tensor} dict), so the loader reads both alike.
    """

    HELD = 2
    """Batches whose DALI outputs stay referenced after their copy was queued: a copy queued on the
    stream must never outlive the buffer it reads, whatever order DALI frees it in."""

    def __init__(self, pipe, device):
        self.pipe = pipe
        self.device = device
        self.held = []

    def __iter__(self):
        import torch
        from nvidia.dali.plugin.pytorch import feed_ndarray, to_torch_type
        while True:
            stream = torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None
            outs = self.pipe.run(stream)
            batch = {}
            for name, tensor_list in zip(("images", "labels"), outs):
                on_gpu = _on_gpu(tensor_list)
                dense = tensor_list.as_tensor()
                target = torch.empty(dense.shape(), dtype=to_torch_type[dense.dtype],
                                     device=self.device if on_gpu else "cpu")
                batch[name] = feed_ndarray(dense, target, cuda_stream=stream if on_gpu else None)
            self.held = (self.held + [outs])[-self.HELD:]
            yield [batch]


def _on_gpu(tensor_list) -> bool:
    return type(tensor_list).__name__ == "TensorListGPU"


def torch_gpu_name(device) -> str:
    if device.type != "cuda":
        return ""
    import torch
    return torch.cuda.get_device_name(device)


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
