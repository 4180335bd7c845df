"""Records of an older definition re-derived from their windows when read, and figures with no interval
of their own judged against an explicit assumed noise."""
import json

import pytest

from bench.analysis import claims, noise
from bench.store import query, rederive
from bench.store.record import DEFINITIONS


def _record(loader="synthetic", version=4, windows=((1000.0, 1000.0, 1000.0),), name="amp-fp16", run="r1",
            ci=None, **case):
    figures = [len(w) / sum(1 / x for x in w) for w in windows]  # each window holds the same images
    m = {"images_per_s": sorted(figures)[len(figures) // 2], "images_per_s_per_gpu": 1.0, "spread_pct": 0.0,
         "data_wait_pct": 0.0, "step_time_median_s": 0.1, "global_batch": 256, "images_per_s_ci95": ci}
    return {"schema": 2, "run_id": run, "sweep": "s", "case_id": "stored-id", "machine": "m", "commit_folder": "abc", "env": {},
            "status": "ok", "started_at": "2026-01-01", "definitions": {**DEFINITIONS, "images_per_s": version},
            "case": {"name": name, "loader": loader, "data_dir": "/d" if loader != "synthetic" else "", **case},
            "processes": [{"images_per_s": f, "images_per_s_repeats": list(w)} for f, w in zip(figures, windows)],
            "metrics": m}


def test_definition_3_of_a_real_loader_loses_the_floors_interval():
    d = _record("torch", 3, ci=[900.0, 1100.0])
    assert rederive.rederive(d, floor={"rel_sd": 0.01, "n": 3})
    r = query.wrap(d)
    assert r.current and r.rederived and r.ci95 is None  # one process of its own: no interval
    assert r.images_per_s == pytest.approx(1000.0)


def test_definition_2_of_a_synthetic_case_takes_the_span_and_its_runs_floor():
    # one process whose windows ran 1000 and 2000 images/s: the median said 1500, the span says 1333.3
    d = _record("synthetic", 2, windows=((1000.0, 2000.0),))
    d["processes"][0]["images_per_s"] = 1500.0
    d["metrics"]["images_per_s"] = 1500.0
    assert rederive.rederive(d, floor={"rel_sd": 0.01, "n": 3})
    m = d["metrics"]
    assert m["images_per_s"] == pytest.approx(4000 / 3) and m["images_per_s_ci95"] is not None
    assert d["rederived_from"] == {"images_per_s": 2} and d["definitions"]["images_per_s"] == DEFINITIONS["images_per_s"]


def test_definition_2_of_a_real_loader_and_schema_1_stay_older():
    d = _record("dali", 2)
    assert not rederive.rederive(d, None) and "pauses" in rederive.why_not(d)
    old = {**_record(), "processes": []}
    assert not rederive.rederive({**old, "definitions": {"images_per_s": 1}}, None)


def test_a_record_is_re_derived_when_read_with_its_runs_floor(tmp_path):
    d = _record("synthetic", 3, ci=[990.0, 1010.0])
    path = tmp_path / "m" / "abc" / "s" / "stored-id" / "r1.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(d))
    (r,), problems = query.load([tmp_path])
    assert problems == [] and r.rederived and r.current and r.ci95 is None  # no floor stored beside it
    assert json.loads(path.read_text())["definitions"]["images_per_s"] == 3  # the file itself is never rewritten


def _at(d, when):
    d["started_at"] = when
    return query.wrap(d)


def test_assumed_noise_is_the_largest_earlier_spread_of_the_same_configuration_else_the_default():
    windows = ((1000.0,) * 3, (1100.0,) * 3, (1050.0,) * 3)
    three = _at(_record("torch", windows=windows, name="loader-torch"), "2026-01-02T00:00:00+00:00")
    one = _at(_record("torch", name="loader-torch", run="r2"), "2026-01-03T00:00:00+00:00")
    renamed = _at(_record("torch", name="other-name", run="r3"), "2026-01-03T00:00:00+00:00")
    earlier = _at(_record("torch", name="loader-torch", run="r0"), "2026-01-01T00:00:00+00:00")
    other_knobs = _at(_record("torch", name="loader-torch", run="r4", num_workers=4), "2026-01-03T00:00:00+00:00")
    assumed = noise.assumed_noise([three, one, renamed, earlier, other_knobs])
    half, source = noise.noise_for(one, assumed)
    assert half == pytest.approx(100 * 100 / 1050)  # (1100 - 1000) / median, from the same configuration
    assert "largest spread of 3 processes of this configuration on m up to its run" in str(source)
    assert "同一配置 3 个进程的最大离散度" in source.text("zh")  # the same words for a Chinese report
    assert noise.noise_for(renamed, assumed)[0] == pytest.approx(half)  # a name is not a configuration
    # a run made before the spread was shown, or another configuration, borrows the default
    for r in (earlier, other_knobs):
        half, source = noise.noise_for(r, assumed)
        assert half == noise.DEFAULT_HALF_PCT["torch"] and "default for a torch case" in str(source)


def test_a_borrowed_noise_is_frozen_when_later_runs_are_stored():
    """A wider spread of the same configuration measured later never moves a verdict already made."""
    before = _at(_record("torch", windows=((1000.0,) * 3, (1020.0,) * 3, (1010.0,) * 3), name="t"), "2026-01-01T00:00:00+00:00")
    judged = _at(_record("torch", name="t", run="r2"), "2026-01-02T00:00:00+00:00")
    wild = _at(_record("torch", windows=((600.0,) * 3, (1400.0,) * 3, (1000.0,) * 3), name="t", run="r3"),
               "2026-01-05T00:00:00+00:00")
    then = noise.noise_for(judged, noise.assumed_noise([before, judged]))[0]
    now = noise.noise_for(judged, noise.assumed_noise([before, judged, wild]))[0]
    assert then == now == pytest.approx(100 * 20 / 1010)
    assert noise.noise_for(_at(_record("torch", name="t", run="r6"), "2026-01-06T00:00:00+00:00"),
                           noise.assumed_noise([before, wild]))[0] == pytest.approx(80.0)


def test_a_large_effect_without_intervals_is_shown_not_judged_by_a_borrowed_noise():
    """+259% from more workers, each side one process of a real loader: no interval of its own, so the
    claim is shown, never judged by another case's spread (the claim experiments pair such cases)."""
    base = {"strategy": "dp", "gpus": 1, "precision": "fp32", "num_workers": 0}
    before = query.wrap(_record("torch", windows=((1000.0,) * 3,), name="ablation-00-baseline", **base))
    after = query.wrap(_record("torch", windows=((3590.0,) * 3,), name="ablation-01-num-workers", run="r2",
                               **{**base, "num_workers": -1, "persistent_workers": True}))
    v = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "workers"), [before, after])
    assert v["verdict"] == claims.INCONCLUSIVE and v["effect"] == "+259.0%"
    assert "shown, not judged: no interval of its own for ablation-00-baseline and ablation-01-num-workers" \
        in v["evidence"] and "assumed" not in v["evidence"]


def _store_run(root, run, records, floor, floor_end=None, **manifest_fields):
    for d in records:
        d["run_id"] = run
        path = root / "m" / "abc" / "s" / d["case"]["name"] / f"{run}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(d))
    manifest = root / "m" / "abc" / "runs" / f"{run}.json"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    named = {"case_id": "noise-floor-x"}
    manifest.write_text(json.dumps({"run_id": run, "machine": "m", "noise_floor": {**floor, **named},
                                    "noise_floor_end": {**floor_end, **named} if floor_end else None,
                                    **manifest_fields}))


def _workers_pair():
    base = {"strategy": "dp", "gpus": 1, "precision": "fp32", "num_workers": 0}
    return [_record("torch", windows=((1000.0,) * 3,), name="ablation-00-baseline", **base),
            _record("torch", windows=((3590.0,) * 3,), name="ablation-01-num-workers",
                    **{**base, "num_workers": -1, "persistent_workers": True})]


@pytest.mark.parametrize("floor, floor_end, why", [
    ({"images_per_s": [6.2, 22.4, 9.1], "n": 3, "rel_sd": 0.687}, None, "sd is 68.7% over 3 processes, above the 5%"),
    ({"images_per_s": [100.0, 101.0, 99.0], "n": 3, "rel_sd": 0.01},
     {"images_per_s": [90.0, 91.0], "n": 2, "rel_sd": 0.008}, "moved -9.5% between the run's start and end"),
])
def test_a_run_too_noisy_or_drifting_warns_once_at_the_top_and_judges_nothing(tmp_path, floor, floor_end, why):
    from bench.present import report
    _store_run(tmp_path, "noisy", _workers_pair(), floor, floor_end)
    records = query.load([tmp_path])[0]
    assumed = noise.assumed_noise(records)
    assert why in str(assumed.unreliable["noisy"])
    text = report.render(records, assumed=assumed)
    body = text.split("\n# ", 1)[1].split("\n", 2)[2]  # the commit's section, after the answers
    assert body.lstrip().startswith("**WARNING: run noisy cannot be judged:") and text.count("WARNING") == 1
    assert "none of its verdicts stands" in " ".join(body.split())
    v = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "workers"), records)
    assert v["verdict"] == claims.INCONCLUSIVE and "run noisy is unreliable" in v["evidence"]
    # figures with intervals of their own are not judged in such a run either
    with_ci = _workers_pair()
    for d in with_ci:
        ips = d["metrics"]["images_per_s"]
        d["metrics"]["images_per_s_ci95"] = [ips * 0.99, ips * 1.01]
    _store_run(tmp_path / "own", "noisy", with_ci, floor, floor_end)
    v = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "workers"), query.load([tmp_path / "own"])[0])
    assert v["verdict"] == claims.INCONCLUSIVE and "run noisy is unreliable" in v["evidence"]
    # the same pair in a steady run: one process each, no interval of its own, so shown, not judged
    _store_run(tmp_path / "steady", "steady", _workers_pair(), {"images_per_s": [100.0, 101.0, 99.0], "n": 3,
                                                                "rel_sd": 0.01})
    steady = query.load([tmp_path / "steady"])[0]
    v = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "workers"), steady)
    assert v["verdict"] == claims.INCONCLUSIVE and "not judged" in v["evidence"]


def test_a_run_too_noisy_to_judge_names_the_verdicts_that_stand_anyway(tmp_path):
    """An all-reduce count needs no noise: the warning says it stands, and the claims agree with it."""
    from bench.present import report
    ddp = {"strategy": "ddp", "gpus": 2, "precision": "fp32", "accumulation_steps": 4}
    pair = [_record(name="ddp-accumulate-article", accumulation_mode="article", **ddp),
            _record(name="ddp-accumulate-no_sync", accumulation_mode="no_sync", **ddp)]
    for d, calls in zip(pair, (32, 8)):
        d["metrics"]["allreduce_calls_per_step"] = calls
    _store_run(tmp_path, "noisy", pair, {"images_per_s": [6.2, 22.4, 9.1], "n": 3, "rel_sd": 0.687})
    records = query.load([tmp_path])[0]
    text = " ".join(report.render(records, assumed=noise.assumed_noise(records)).split())
    assert ("timings judged inconclusive; these verdicts need no noise and stand: accumulation-fewer-allreduces "
            "(does not hold, 32 vs 8 all-reduces per step)") in text  # the article's loop all-reduced 4x as often
    assert "accumulation-fewer-allreduces: ddp-accumulate-article -> ddp-accumulate-no_sync, 2 GPU(s), an exact count" \
        in text
    assert "its verdicts are inconclusive" not in text  # no line that the claims section contradicts
    v = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "accumulation-fewer-allreduces"), records)
    assert v["verdict"] == claims.FAILS


def test_an_interrupted_run_says_so_beside_its_noise_floor(tmp_path):
    from bench.present import report
    _store_run(tmp_path, "cut", _workers_pair(), {"images_per_s": [100.0, 101.0, 99.0], "n": 3, "rel_sd": 0.01},
               interrupted=True, finished_at="2026-12-06T06:49:05+00:00")
    text = " ".join(" ".join(report.noise_floor_lines(query.load([tmp_path])[0])).split())
    assert "run cut: noise floor 1.00%" in text and "interrupted at 2026-12-06T06:49:05+00:00 before its end" in text


def test_a_stored_span_that_never_updated_is_read_as_failed():
    from bench.store.rederive import mark_not_training
    rank = {"steps_per_window": 49, "images": [12544] * 3}
    skipped = {"status": "ok", "ranks": [{**rank, "updates_skipped_in_span": 147, "loss_scale_span": [512.0, 2.9e-42]}]}
    assert mark_not_training(skipped) and skipped["status"] == "error" and skipped["rederived_status"] == "not training"
    assert "skipped every update of the 147 measured steps (the loss scale fell from 512 to 2.9e-42)" in skipped["reason"]
    fell = {"status": "ok", "ranks": [{**rank, "updates_skipped_in_span": "all: the scale fell to 0",
                                       "loss_scale_span": [512.0, 0.0]}]}
    assert mark_not_training(fell)
    for fine in ({"status": "ok", "ranks": [{**rank, "updates_skipped_in_span": 2, "loss_scale_span": [4.0, 1.0]}]},
                 {"status": "ok", "ranks": [rank]}, {"status": "oom", "ranks": []}):
        before = dict(fine)
        assert not mark_not_training(fine) and fine == before
