"""The input blocks of a recipe script (present/recipe.py puts one between recipe_script's head and loop):
one synthetic batch, or JPEGs through DALI or the torch DataLoader, each a `batches` generator. Braces that
the script itself uses are doubled."""
from __future__ import annotations

SYNTHETIC = '''

def batches(device, rank, world):
    """One synthetic batch made once on the device, the same tensors every step."""
    g = torch.Generator().manual_seed(S["seed"] + rank)
    fmt = torch.channels_last if S["channels_last"] else torch.contiguous_format
    images = torch.randn(S["batch_size"], 3, S["image_size"], S["image_size"], generator=g)
    zeros = torch.zeros(S["batch_size"], S["input_channels"] - 3, S["image_size"], S["image_size"])
    images = torch.cat([images, zeros], 1)  # channels past the RGB hold zeros
    half = S["precision"] == "fp16" and device.type == "cuda"  # the dtype DALI delivers: one program, fed or not
    images = images.to(device, torch.float16 if half else torch.float32).contiguous(memory_format=fmt)
    labels = torch.randint(0, S["num_classes"], (S["batch_size"],), generator=g).to(device)
    while True:
        yield images, labels
'''

JPEG_FOLDER = '''

def image_folder(root):
    """(files, labels) of an ImageFolder tree: ROOT/<class>/<image>.jpg, one label per class folder."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    files, labels = [], []
    for i, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, c))):
            if f.lower().endswith((".jpg", ".jpeg")):
                files.append(os.path.join(root, c, f))
                labels.append(i)
    if not files:
        raise SystemExit(f"no JPEG files under {{root}}/<class>/; expected an ImageFolder tree")
    return files, labels


def cores_per_process():
    """This machine's cores shared over the processes on it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
'''

DALI = JPEG_FOLDER + '''

def batches(device, rank, world, root):
    """NVIDIA DALI: read, decode {decode}, resize the random crop, flip and normalise, delivered in the
    layout and dtype the model reads first, sharded by rank; with a CPU share, a second pipeline decodes
    that share of each batch on the CPU and the two parts are joined on the device."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    files, labels = image_folder(root)
    threads = S["dali_threads"] if S["dali_threads"] > 0 else cores_per_process()
    on_gpu = device.type == "cuda"
    out_dtype = types.FLOAT16 if S["precision"] == "fp16" and on_gpu else types.FLOAT

    def pipeline(files, labels, batch, decode_on, threads, seed):
        @pipeline_def(batch_size=batch, num_threads=threads, device_id=device.index if on_gpu else None,
                      seed=seed, prefetch_queue_depth=S["dali_prefetch_depth"])
        def pipe():
            jpegs, lab = fn.readers.file(files=files, labels=labels, shard_id=rank, num_shards=world,
                                         random_shuffle=True, name="Reader")
            share = {{"hw_decoder_load": S["hw_decoder_load"]}} if decode_on == "mixed" else {{}}
            window, size = dict(random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 4 / 3]), S["image_size"]
            if S["dali_crop"] == "decoder":  # the decoder reads only the crop's region of each JPEG
                images = fn.resize(fn.decoders.image_random_crop(jpegs, device=decode_on, output_type=types.RGB,
                                                                 **window, **share), resize_x=size, resize_y=size)
            else:  # whole images decoded (what hardware JPEG decoders take), then cropped and resized at once
                images = fn.decoders.image(jpegs, device=decode_on, output_type=types.RGB, **share)
                images = fn.random_resized_crop(images, size=[size, size], **window)
            images = images.gpu() if on_gpu and decode_on == "cpu" else images  # normalised on the GPU
            images = fn.crop_mirror_normalize(images, dtype=out_dtype, mean=MEAN, std=STD,
                                              output_layout="HWC" if S["channels_last"] else "CHW",
                                              pad_output=S["input_channels"] == 4,  # a zero 4th channel
                                              mirror=fn.random.coin_flip(probability=0.5))
            return images, lab.gpu() if on_gpu else lab

        p = pipe()
        p.build()
        return p

    if S["dali_cpu_share"] > 0:
        # the CPU's share of each batch from files of its own (spread over the list), on threads of its own;
        # the hardware decoders need few host threads, and one core stays with the training loop
        cpu_batch = round(S["batch_size"] * S["dali_cpu_share"])
        to_cpu = [int((i + 1) * S["dali_cpu_share"]) > int(i * S["dali_cpu_share"]) for i in range(len(files))]
        gpu_threads = min(4, max(1, threads // 4))
        parts = [([f for f, c in zip(files, to_cpu) if c == cpu], [lab for lab, c in zip(labels, to_cpu) if c == cpu])
                 for cpu in (False, True)]
        pipes = [pipeline(*parts[0], S["batch_size"] - cpu_batch, S["dali_device"], gpu_threads, S["seed"] + rank),
                 pipeline(*parts[1], cpu_batch, "cpu", max(1, threads - gpu_threads - 1), S["seed"] + world + rank)]
    else:
        pipes = [pipeline(files, labels, S["batch_size"], S["dali_device"], threads, S["seed"] + rank)]

    def joined(parts):
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    if on_gpu and S["dali_handoff"] == "stream":
        # outputs bound to the training stream, which waits for DALI on the GPU: the host queues the step at once
        from nvidia.dali.plugin.pytorch import feed_ndarray, to_torch_type
        held = []  # the last batches' DALI buffers stay referenced while their copies are queued
        while True:
            stream = torch.cuda.current_stream(device)
            outs = [p.run(stream) for p in pipes]
            batch = []
            for name in (0, 1):
                copies = []
                for t in (o[name].as_tensor() for o in outs):
                    out = torch.empty(t.shape(), dtype=to_torch_type[t.dtype], device=device)
                    copies.append(feed_ndarray(t, out, cuda_stream=stream))
                batch.append(joined(copies))
            images, target = batch
            held = (held + [outs])[-2:]
            if S["channels_last"]:
                images = images.permute(0, 3, 1, 2)  # NHWC in memory, NCHW to the model: channels_last
            yield images, target.reshape(-1).long()

    def epochs(p):
        it = DALIGenericIterator([p], ["images", "labels"], reader_name="Reader",
                                 last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)
        while True:
            yield from it

    streams = [epochs(p) for p in pipes]
    while True:
        outs = [next(s)[0] for s in streams]
        images = joined([o["images"] for o in outs])
        if S["channels_last"]:
            images = images.permute(0, 3, 1, 2)  # NHWC in memory, NCHW to the model: channels_last
        yield images, joined([o["labels"] for o in outs]).reshape(-1).long().to(device, non_blocking=True)
'''

TORCH = JPEG_FOLDER + '''

def batches(device, rank, world, root):
    """The torch DataLoader: workers decode a random crop of each JPEG and flip it; uint8 batches are
    converted and normalised on the device."""
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler
    from torchvision.transforms import v2

    files, labels = image_folder(root)
    crop = v2.Compose([v2.RandomResizedCrop(S["image_size"], antialias=True), v2.RandomHorizontalFlip(),
                       v2.PILToTensor()])

    class Jpegs(Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            with Image.open(files[i]) as im:
                return crop(im.convert("RGB")), labels[i]

    data = Jpegs()
    workers = S["num_workers"] if S["num_workers"] >= 0 else cores_per_process()
    sampler = (DistributedSampler(data, world, rank, seed=S["seed"], drop_last=True) if world > 1
               else RandomSampler(data))
    loader = DataLoader(data, batch_size=S["batch_size"], sampler=sampler, num_workers=workers,
                        pin_memory=S["pin_memory"] and device.type == "cuda", drop_last=True,
                        persistent_workers=S["persistent_workers"] and workers > 0,
                        prefetch_factor=S["prefetch_factor"] if workers else None)
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    fmt = torch.channels_last if S["channels_last"] else torch.contiguous_format
    epoch = 0
    while True:
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        for images, target in loader:
            images = images.to(device, non_blocking=S["non_blocking"]).contiguous(memory_format=fmt)
            images = images.float().sub_(mean).div_(std)
            if S["input_channels"] > 3:  # channels of zeros after the RGB, as the model's stem reads them
                n, _, h, w = images.shape
                zeros = torch.zeros(n, S["input_channels"] - 3, h, w, device=device)
                images = torch.cat([images, zeros], 1).contiguous(memory_format=fmt)
            yield images, target.to(device, non_blocking=S["non_blocking"])
        epoch += 1
'''
