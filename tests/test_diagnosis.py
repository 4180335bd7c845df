import json
import time

import pytest

from bench.analysis import diagnose, flops
from bench.harness import peak
from bench.worker import gpu_sampler


def _record(wait=0.0, ranks=None, precision="bf16", gpus=2, ips=9000.0, loader_only=False, stall=None):
    case = {"model": "resnet50", "image_size": 224, "num_classes": 1000, "precision": precision, "gpus": gpus,
            "device": "cuda", "loader_only": loader_only}
    return {"status": "ok", "case": case, "metrics": {"data_wait_pct": wait, "images_per_s": ips, "input_stall_pct": stall},
            "ranks": ranks or [{"windows_s": [1.0, 1.0]}]}


def test_exposed_communication_by_hand():
    # windows average 1.0 s, without gradient sync 0.8 s: sync adds 20% of the step
    ranks = [{"windows_s": [0.9, 1.1], "no_sync_window_s": 0.8}, {"windows_s": [1.0, 1.0], "no_sync_window_s": 0.9}]
    assert diagnose.exposed_comm_pct(ranks) == pytest.approx(20.0)
    assert diagnose.exposed_comm_pct([{"windows_s": [1.0]}]) is None


def test_harness_overhead_by_hand():
    # fastest harnessed window 1.00 s against 0.99 s for the minimal loop: 1% overhead
    assert diagnose.harness_overhead_pct([{"windows_s": [1.02, 1.0], "minimal_window_s": 0.99}]) == pytest.approx(1.0)


def test_mfu_by_hand():
    # 9000 images/s x 24.3 GFLOP per image over 2 GPUs x 800 TFLOP/s = 13.67%
    assert flops.mfu_pct(9000, 24.3e9, 2, 800e12) == pytest.approx(13.67, abs=0.01)


def test_resnet50_training_flops_per_image(tmp_path, monkeypatch):
    import torchvision

    from bench.core import model_flops
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path))
    # forward is about 4.1 G multiply-adds (8.2 GFLOP); backward counted as twice the forward
    counted = model_flops.count_training_flops(lambda: torchvision.models.resnet50(), 224)
    assert counted == pytest.approx(24.5e9, rel=0.01)
    # torch's counter would give EfficientNet-B0's depthwise backward 40x its forward: 3x forward it is
    effnet = model_flops.count_training_flops(lambda: torchvision.models.efficientnet_b0(), 224)
    assert effnet == pytest.approx(2.31e9, rel=0.01)
    flops.training_flops_per_image.cache_clear()
    assert flops.training_flops_per_image("resnet50", 224) == counted  # counted once, then kept for this install
    (kept,) = (tmp_path / "facts").glob("flops-*.json")
    assert json.loads(kept.read_text())["value"] == counted


def test_a_record_with_its_workers_count_is_diagnosed_without_counting(monkeypatch):
    monkeypatch.setattr(flops, "training_flops_per_image", lambda *a: pytest.fail("counted again"))
    rec = _record(ranks=[{"rank": 0, "windows_s": [1.0], "model_flops_per_image": 1e9,
                          "model_flops_method": "3x forward"}], gpus=1)
    d = diagnose.diagnose(rec, {"flops_per_s": {"bf16": 1e13}})
    assert d["model_flops_per_image"] == 1e9 and d["mfu_pct"] == pytest.approx(100 * 9000 * 1e9 / 1e13)


@pytest.mark.parametrize("wait, stall, no_sync, verdict, evidence", [
    (35.0, None, None, "input-bound", "the host waited (older record) 35% of the window"),
    (35.0, 2.0, None, "compute-bound", "input stall 2%"),  # the host waited while queued work kept the GPU busy
    (5.0, 30.0, None, "input-bound", "the device sat idle 30% of the window for input"),
    (2.0, 1.0, 0.7, "communication-bound", "gradient sync adds 30%"),
    (2.0, 1.0, 0.98, "compute-bound", "input stall 1%, exposed sync 2%"),
])
def test_verdicts(wait, stall, no_sync, verdict, evidence):
    ranks = [{"windows_s": [1.0, 1.0], **({"no_sync_window_s": no_sync} if no_sync else {})}]
    d = diagnose.diagnose(_record(wait=wait, stall=stall, ranks=ranks), {"flops_per_s": {"bf16": 800e12}})
    assert d["verdict"] == verdict
    assert d["mfu_pct"] == pytest.approx(100 * 9000 * flops.training_flops_per_image("resnet50", 224) / 1.6e15)
    assert evidence in d["evidence"]


def test_gpu_decoding_behind_a_busy_gpu_is_said_so():
    busy = [{"windows_s": [1.0], "gpu_samples": {"0": {"gpu_util_pct": {"mean": 96.0}}}}]
    rec = _record(wait=33.0, ranks=busy, gpus=1)
    rec["case"].update(loader="dali", dali_device="mixed")
    d = diagnose.diagnose(rec)
    assert d["verdict"] == "input-bound"
    assert d["evidence"].endswith("GPU busy 96% of samples; DALI decodes on the same GPU, which training keeps busy")
    rec["case"]["dali_device"] = "cpu"  # CPU decoding: the plain input-bound evidence
    assert "same GPU" not in diagnose.diagnose(rec)["evidence"]


def test_a_gpu_idle_with_no_input_stall_or_sync_is_host_bound():
    def ranks(util):
        return [{"windows_s": [1.0], "gpu_samples": {"0": {"gpu_util_pct": {"mean": util}}}}]
    # the 128-image compiled step on one H200: 34.4 ms a step, GPU busy 56% of samples, input stall 0%
    d = diagnose.diagnose(_record(stall=0.0, ranks=ranks(56.0), gpus=1))
    assert d["verdict"] == "host-bound"
    assert d["evidence"].startswith("GPU busy 56% of samples with input stall 0%: the host queues each step slower")
    assert "compile_wrapper=cpp" in d["evidence"]
    fed = _record(stall=0.1, ranks=ranks(81.0), gpus=1)  # fed by DALI at batch 256: the host also feeds
    fed["case"].update(loader="dali", dali_device="mixed")
    fed["metrics"]["host_cpu_busy_pct"] = 14.0
    d = diagnose.diagnose(fed)
    assert d["verdict"] == "host-bound" and d["evidence"].endswith("give it time back; host CPUs 14% busy")
    dp = _record(stall=0.0, ranks=ranks(60.0), gpus=1)
    dp["case"]["strategy"] = "dp"  # one process drives every GPU: its remedy is a process per GPU
    assert diagnose.diagnose(dp)["evidence"].endswith("DDP's process per GPU gives each GPU a host thread of its own")
    assert diagnose.diagnose(_record(stall=0.0, ranks=ranks(90.0), gpus=1))["verdict"] == "compute-bound"
    assert diagnose.diagnose(_record(stall=30.0, ranks=ranks(56.0), gpus=1))["verdict"] == "input-bound"
    assert diagnose.diagnose(_record(stall=0.0, gpus=1))["verdict"] == "compute-bound"  # no samples: no claim
    on_cpu = _record(stall=0.0, ranks=ranks(56.0), gpus=1)
    on_cpu["case"]["device"] = "cpu"
    assert diagnose.diagnose(on_cpu)["verdict"] == "compute-bound"  # on a CPU the host is the device


def test_the_hosts_cores_are_named_where_a_loader_decodes_on_them():
    rec = _record(wait=5.0, stall=40.0, gpus=1)
    rec["metrics"].update(host_cpu_busy_pct=97.4, host_cpu_steal_pct=6.25)
    assert "host CPUs" not in diagnose.diagnose(rec)["evidence"]  # synthetic input: no loader on the host
    rec["case"]["loader"] = "torch"
    d = diagnose.diagnose(rec)
    assert d["verdict"] == "input-bound" and d["host_cpu_busy_pct"] == 97.4
    assert d["evidence"].endswith("for input; host CPUs 97% busy (no core to spare for decoding), 6.2% of their "
                                  "time taken by the hypervisor (other guests): a pace no setting here controls")
    rec["metrics"].update(host_cpu_busy_pct=60.0, host_cpu_steal_pct=0.5)  # cores to spare, nothing taken
    assert diagnose.diagnose(rec)["evidence"].endswith("for input; host CPUs 60% busy")
    rec["metrics"].update(host_cpu_busy_pct=None, host_cpu_steal_pct=None)  # an older record
    assert "host CPUs" not in diagnose.diagnose(rec)["evidence"]
    only = _record(loader_only=True)
    only["case"]["loader"] = "dali"
    only["metrics"].update(host_cpu_busy_pct=99.0, host_cpu_steal_pct=0.0)
    assert diagnose.diagnose(only)["evidence"] == ("no model ran: this is the loader's ceiling; host CPUs 99% busy "
                                                   "(no core to spare for decoding)")


def test_host_cpu_shares_by_hand(tmp_path):
    from bench.worker import host_cpu
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 20 500 5 0 0 0 0 0\ncpu0 50 0 10 250 2 0 0 0 0 0\n")
    before = host_cpu.read(stat)
    # in between: 50 ticks user, 10 system, 30 idle, 10 stolen by the hypervisor
    stat.write_text("cpu  150 0 30 530 5 0 0 10 0 0\n")
    after = host_cpu.read(stat)
    assert host_cpu.shares(before, after) == {"busy_pct": 60.0, "steal_pct": 10.0}
    assert host_cpu.shares(after, after) is None  # no tick between: nothing to divide
    stat.write_text("cpu  150 0 30 530\n")  # an old kernel's shorter line: steal counted as 0
    assert host_cpu.read(stat)["steal"] == 0
    assert host_cpu.read(tmp_path / "missing") is None and host_cpu.shares(None, after) is None
    fields = host_cpu.over_windows([before, after, None])
    assert fields["host_cpu_busy_pct"] is None  # the last reading failed: no span share claimed
    assert fields["host_cpu_busy_pct_windows"] == [60.0, None] and fields["host_cpu_steal_pct_windows"] == [10.0, None]


def test_loader_only_and_failed_cases():
    assert diagnose.diagnose(_record(loader_only=True))["verdict"] == "loader-only"
    assert diagnose.diagnose({"status": "oom"}) == {}


class FakeNvml:
    NVML_CLOCK_SM = 1

    class _Util:
        gpu = 90

    class _Mem:
        used = 10 * 2**30

    def nvmlDeviceGetUtilizationRates(self, h):
        return self._Util()

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetMemoryInfo(self, h):
        return self._Mem()

    def nvmlDeviceGetPowerUsage(self, h):
        return 650_000  # milliwatts


class CappedNvml(FakeNvml):
    """An NVML that also reports the device's limits and its clock event reasons: the power cap
    (0x4) set in every other sample, beside the idle reason (0x1)."""
    def __init__(self):
        self.reads = 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        self.reads += 1
        return 0x4 | 0x1 if self.reads % 2 else 0x1

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980


def test_sampler_only_samples_inside_windows():
    s = gpu_sampler.GpuSampler({"cuda:0": object()}, interval_s=0.01, nvml=FakeNvml())
    s.start()
    time.sleep(0.1)
    s.stop()
    n = len(s.samples["cuda:0"])
    time.sleep(0.05)
    assert len(s.samples["cuda:0"]) == n and n >= 3  # nothing between windows
    summary = s.summary()["cuda:0"]
    assert summary["gpu_util_pct"]["mean"] == 90 and summary["power_w"]["max"] == 650.0
    assert summary["sm_clock_mhz"]["min"] == 1980


def test_sampler_counts_the_power_cap_and_reads_the_limits_once():
    s = gpu_sampler.GpuSampler({"cuda:0": object()}, interval_s=0.0, nvml=CappedNvml())
    for _ in range(4):
        s.samples["cuda:0"].append(gpu_sampler.read(s.nvml, None))
    summary = s.summary()["cuda:0"]
    assert summary["power_capped_pct"]["mean"] == 50.0 and summary["power_capped_pct"]["max"] == 100.0
    assert summary["power_limit_w"] == 700.0 and summary["sm_clock_max_mhz"] == 1980.0
    # an NVML without clock reasons or limits: the share and the ceilings are absent, the rest stays
    plain = gpu_sampler.GpuSampler({"cuda:0": object()}, nvml=FakeNvml())
    plain.samples["cuda:0"].append(gpu_sampler.read(plain.nvml, None))
    assert "power_capped_pct" not in plain.summary()["cuda:0"] and "power_limit_w" not in plain.summary()["cuda:0"]
    assert plain.summary()["cuda:0"]["power_w"]["mean"] == 650.0


@pytest.mark.parametrize("capped, said", [(92.0, True), (30.0, False), (None, False)])
def test_a_compute_bound_gpu_at_its_power_limit_is_said_so(capped, said):
    g = {"gpu_util_pct": {"mean": 100.0}, "sm_clock_mhz": {"mean": 1615.0}, "power_w": {"mean": 685.2},
         "sm_clock_max_mhz": 1980.0, "power_limit_w": 700.0}
    if capped is not None:
        g["power_capped_pct"] = {"mean": capped}
    d = diagnose.diagnose(_record(stall=0.0, ranks=[{"windows_s": [1.0], "gpu_samples": {"0": g}}], gpus=1))
    assert d["verdict"] == "compute-bound"
    text = "at its power limit: the power cap held the clocks down in 92% of samples, SM clock 1,615 of 1,980 MHz, 685 W of 700 W"
    assert (text in d["evidence"]) == said


def test_sampler_without_nvml_is_silent():
    s = gpu_sampler.GpuSampler({})
    s.start()
    s.stop()
    assert s.summary() == {}


def test_peak_is_measured_once_and_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path / "cache"))
    p = peak.load_or_measure(tmp_path, "cpu", {"cpu_model": "x"})
    assert p["flops_per_s"]["fp32"] > 1e8 and p["env"]["cpu_model"] == "x"
    stored = json.loads((tmp_path / "peak.json").read_text())
    assert stored == p
    assert set(p["flops_per_s"]) == {"fp32", "bf16", "fp16"}  # each precision a CPU case may ask for
    # each at the size asked for or a halving of it where a product is slow (bf16 without fast CPU kernels)
    assert p["matrix_size"] == 1024 and set(p["matrix_size_measured"].values()) <= {256, 512, 1024}
    (tmp_path / "peak.json").write_text(json.dumps({**p, "flops_per_s": {"fp32": 1.0, "bf16": 2.0, "fp16": 3.0}}))
    assert peak.load_or_measure(tmp_path, "cpu", {})["flops_per_s"]["fp32"] == 1.0  # not measured again
    # a file from before bf16 and fp16 were measured on the CPU is measured again, not read as it is
    measured = _measuring_again(monkeypatch, p)
    (tmp_path / "peak.json").write_text(json.dumps({**p, "flops_per_s": {"fp32": 1.0}}))
    assert peak.load_or_measure(tmp_path, "cpu", {})["flops_per_s"] == p["flops_per_s"] and measured == ["cpu"]


def _measuring_again(monkeypatch, measurement: dict) -> list[str]:
    """Later measurements give `measurement` (a real one costs a fresh process seconds; the test above makes one);
    returns the devices each was asked for."""
    asked = []
    monkeypatch.setattr(peak, "measured_in_a_fresh_process",
                        lambda device: asked.append(device) or {k: v for k, v in measurement.items() if k != "env"})
    return asked


def test_a_new_results_tree_takes_the_hosts_peak_measured_under_the_same_software(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path / "cache"))
    env = {"hostname": "box", "cpu_model": "x", "torch": "2.14.1"}
    known = {"device": "cpu", "flops_per_s": {"fp32": 1.0, "bf16": 2.0, "fp16": 3.0},
             "env": {k: env.get(k) for k in peak.MACHINE_KEYS}}
    peak.cache_file(env).parent.mkdir(parents=True)
    peak.cache_file(env).write_text(json.dumps(known))
    assert peak.load_or_measure(tmp_path / "a", "cpu", env) == known  # not measured: 1 FLOP/s is no CPU's
    assert json.loads((tmp_path / "a" / "peak.json").read_text()) == known  # and kept beside the results
    # other software (or another CPU) on the host: measured, and the cache holds the new one
    measured = _measuring_again(monkeypatch, {"device": "cpu", "flops_per_s": {"fp32": 5e9, "bf16": 1e9, "fp16": 1e9}})
    newer = dict(env, torch="2.15.0")
    p = peak.load_or_measure(tmp_path / "b", "cpu", newer)
    assert measured == ["cpu"] and p["flops_per_s"]["fp32"] == 5e9 and p["env"]["torch"] == "2.15.0"
    assert json.loads(peak.cache_file(newer).read_text()) == p


def test_mfu_of_a_cpu_case_is_taken_against_the_peak_of_its_own_precision():
    rec = _record(precision="bf16", gpus=1, ips=10.0)
    rec["case"]["device"] = "cpu"
    d = diagnose.diagnose(rec, {"flops_per_s": {"fp32": 1e12, "bf16": 2e11}})
    assert d["peak_flops_per_s"] == 2e11
    assert d["mfu_pct"] == pytest.approx(100 * 10 * flops.training_flops_per_image("resnet50", 224) / 2e11)


@pytest.mark.slow
def test_ddp_case_reports_exposed_communication_and_harness_overhead(tiny, ddp_pair):
    r = ddp_pair[0]  # two gloo ranks with the overhead check (conftest)
    assert r["status"] == "ok", r
    for rank in r["ranks"]:
        assert rank["no_sync_window_s"] > 0 and rank["minimal_window_s"] > 0
    d = diagnose.diagnose({"status": "ok", "case": tiny.replace(strategy="ddp", gpus=2).to_dict(),
                           "metrics": r["metrics"], "ranks": r["ranks"]})
    assert d["comm_exposed_pct"] is not None and d["harness_overhead_pct"] is not None
    assert d["verdict"] in ("compute-bound", "communication-bound")


def test_a_count_made_the_old_way_is_counted_again_when_read():
    """EfficientNet-B0 at 807e3f6adfb7 on one H100 was stored with torch's forward-and-backward count
    (32.2 GFLOPs per image), which read as an MFU of 152% in fp32: read now, three times the forward."""
    from pathlib import Path

    from bench.present.cases import diagnosis
    from bench.store import query
    folder = Path(__file__).resolve().parent.parent / "results" / "1x-nvidia-h100-80gb-hbm3"
    recs = [r for r in query.load([folder])[0] if r.case["model"] == "efficientnet_b0"
            and r.case["precision"] == "fp32" and r.case["channels_last"]]
    assert recs and recs[0].data["diagnosis"]["mfu_pct"] > 100  # as stored
    d = diagnosis(recs[0])
    assert d["model_flops_per_image"] == pytest.approx(2.31e9, rel=0.01) and d["flops_method"] == "3x forward"
    expected = 100 * recs[0].images_per_s * d["model_flops_per_image"] / d["peak_flops_per_s"]
    assert d["mfu_pct"] == pytest.approx(expected) and d["mfu_pct"] < 15 and "MFU 11%" in d["evidence"]
