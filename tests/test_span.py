"""A process's windows are one continuous span: nothing slow sits between the warm-up and the first
window, where a loader's producers would refill their queue and flatter that window."""
import queue
import threading
import time

import pytest
import torch

from bench.worker import loaders, loop as worker
from bench.worker.context import RankContext

PRODUCE_S = 0.08  # one batch per 80 ms: slower than the model, so the loader sets the pace
QUEUE_DEPTH = 8


class RefillingLoader:
    """A producer thread that keeps a bounded queue of batches full, as the torch DataLoader's workers do."""

    prefetch_batches = 0

    def __init__(self, case):
        self.q = queue.Queue(QUEUE_DEPTH)
        self.stop = threading.Event()
        images = torch.randn(case.batch_size, 3, case.image_size, case.image_size)
        labels = torch.randint(0, case.num_classes, (case.batch_size,))

        def produce():
            while not self.stop.is_set():
                time.sleep(PRODUCE_S)
                while not self.stop.is_set():
                    try:
                        self.q.put((images, labels), timeout=0.05)
                        break
                    except queue.Full:
                        pass
        self.thread = threading.Thread(target=produce, daemon=True)
        self.thread.start()

    def __iter__(self):
        while True:
            yield self.q.get()

    def facts(self):
        return {}

    def close(self):
        self.stop.set()
        self.thread.join()


def test_a_slow_set_up_step_does_not_flatter_the_first_window(small_net, monkeypatch):
    # a network of a few milliseconds a step: the loader sets the pace, however busy the machine; a warm-up long
    # enough to drain what the queue held before it
    case = small_net.replace(warmup_steps=2 * QUEUE_DEPTH, steps=10, min_window_s=0.0, repeats=3)
    monkeypatch.setattr(loaders, "make", lambda c, ctx: RefillingLoader(c))

    def slow_label_check(trainer, batches):  # set-up that takes long enough to refill the whole queue
        time.sleep(QUEUE_DEPTH * PRODUCE_S * 2)
        return {"cpu": "float32"}
    monkeypatch.setattr(worker, "compute_dtypes", slow_label_check)
    m = worker.measure(case, RankContext())
    windows = m["windows_s"]
    # each window is the loader's pace, 10 batches x 80 ms; a refilled queue would give 8 of them free
    assert min(windows) > 10 * PRODUCE_S * 0.6, windows
    assert max(windows) / min(windows) < 1.5, windows
    # the windows are the span's steps, back to back: their sum is the span up to its closing sync
    assert [len(s) for s in m["step_times_s"]] == [10, 10, 10]
    assert 0 <= m["span_s"] - sum(windows) < 0.05


class Stepper:
    """A trainer whose every step takes 10 ms of host time."""
    input_probe = None

    def __init__(self, case):
        self.case = case

    def step(self, batches) -> float:
        time.sleep(0.01)
        return 0.0


def test_what_runs_before_a_window_is_no_steps_time(tiny):
    """Cold reads empty the page cache before each window: that work is counted apart, never in a window."""
    from bench.worker.span import timed_span
    from bench.worker.timing import StepTimer
    timer = StepTimer(RankContext())

    def evict() -> float:
        time.sleep(0.2)
        return 0.2
    span = timed_span(Stepper(tiny), iter(()), timer, steps=3, windows=3, before_window=evict)
    assert [len(w) for w in span["step_times_s"]] == [3, 3, 3]
    assert all(0.009 < s < 0.1 for w in span["step_times_s"] for s in w)  # no step took the 0.2 s pause
    # the first eviction runs before the span opens; the two later ones inside it, between windows
    assert span["cold_evict_s"] == pytest.approx(0.6) and 0.4 < span["span_s"] < 0.6
    plain = timed_span(Stepper(tiny), iter(()), StepTimer(RankContext()), steps=3, windows=3)
    assert "cold_evict_s" not in plain and max(max(w) for w in plain["step_times_s"]) < 0.1


class JpegLikeLoader(RefillingLoader):
    """The refilling loader with files to evict and the queue depth the harness drains, as a real one has."""
    prefetch_batches = QUEUE_DEPTH
    files: list = []


def test_a_cold_window_opens_on_the_loaders_pace_not_on_the_queue_it_filled_during_the_eviction(tiny, monkeypatch):
    """The loader's workers go on decoding while the page cache is emptied before each cold window: the
    batches they queued meanwhile are taken off untimed, so no window gets them free."""
    from bench.worker import storage
    case = tiny.replace(loader="torch", data_dir="/nonexistent", loader_only=True, cold_reads=True,
                        warmup_steps=2, steps=8, min_window_s=0.0, repeats=2)
    assert case.cold_reads
    monkeypatch.setattr(loaders, "make", lambda c, ctx: JpegLikeLoader(c))
    evictions = []

    def slow_evict(files):  # long enough for the producer to fill the whole queue
        evictions.append(files)
        time.sleep(QUEUE_DEPTH * PRODUCE_S * 1.5)
        return QUEUE_DEPTH * PRODUCE_S * 1.5
    monkeypatch.setattr(storage, "evict", slow_evict)
    m = worker.measure(case, RankContext())
    # each window is the loader's pace, 8 batches x 80 ms; a queue filled in the pause would give all 8 free
    assert min(m["windows_s"]) > 8 * PRODUCE_S * 0.6, m["windows_s"]
    assert len(evictions) == 2 and m["cold_batches_drained_per_window"] == QUEUE_DEPTH
