import copy
import json
from pathlib import Path

from bench import claims, results

FIXTURES = Path(__file__).parent / "fixtures" / "results"


def _records():
    return results.load([FIXTURES]).records


def _variant(rec, name, ips, spread=0.01, **case):
    r = copy.deepcopy(rec)
    r["case"].update(name=name, **case)
    r["case_id"] = name
    r["metrics"].update(images_per_s=ips, images_per_s_min=ips * (1 - spread), images_per_s_max=ips * (1 + spread))
    return r


def test_every_claim_is_data_with_a_source_and_cases():
    ids = [c.id for c in claims.CLAIMS]
    assert len(ids) == len(set(ids)) >= 12
    for c in claims.CLAIMS:
        assert c.source.startswith("article ") and c.claim and (c.change or c.kind == "table")


def test_seed_table_claim_against_the_fixture_figures():
    verdict = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "seed-table"), _records())
    assert verdict["verdict"] == claims.HOLDS
    assert "2 GPUs: +11.1% measured against +11.1% published" in verdict["evidence"]
    assert "4 GPUs: +40.1% measured against +40.1% published" in verdict["evidence"]


def test_a_change_inside_the_noise_does_not_hold_and_a_missing_pair_cannot_be_measured():
    base = next(r for r in _records() if r["case"]["name"] == "seed-baseline" and r["case"]["gpus"] == 2)
    recs = [_variant(base, "ablation-01-num-workers", 1000.0), _variant(base, "ablation-02-pin-memory", 1005.0),
            _variant(base, "ablation-00-baseline", 500.0)]
    pin = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "pin-memory"), recs)
    assert pin["verdict"] == claims.FAILS and pin["effect"] == "+0.5%" and "within noise" in pin["evidence"]
    workers = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "workers"), recs)
    assert workers["verdict"] == claims.HOLDS and workers["effect"] == "+100.0%"
    nccl = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "nccl-settings"), recs)
    assert nccl["verdict"] == claims.CANNOT and "run the ablation sweep" in nccl["evidence"]


def test_a_multi_gpu_claim_is_not_judged_on_one_gpu():
    base = next(r for r in _records() if r["case"]["name"] == "seed-baseline" and r["case"]["gpus"] == 2)
    one = [_variant(base, "ablation-03-non-blocking", 800.0, gpus=1), _variant(base, "ablation-04-dp-free-memory-gpus", 700.0, gpus=1)]
    c = next(c for c in claims.CLAIMS if c.id == "dp-free-memory")
    v = claims.evaluate(c, one)
    assert v["verdict"] == claims.CANNOT
    assert v["evidence"] == "it needs 2 or more GPUs and only fewer are stored; run the ablation sweep on 2 or more GPUs"
    two = [_variant(r, r["case"]["name"], r["metrics"]["images_per_s"], gpus=2) for r in one]
    assert claims.evaluate(c, two)["verdict"] == claims.FAILS  # slower on 2 GPUs: judged


def test_accumulation_all_reduce_claim_reads_the_counts():
    base = next(r for r in _records() if r["case"]["name"] == "seed-baseline" and r["case"]["gpus"] == 2)
    article = _variant(base, "ddp-accumulate-article", 900.0, accumulation_steps=8)
    article["metrics"]["allreduce_calls_per_step"] = 32.0
    no_sync = _variant(base, "ddp-accumulate-no_sync", 910.0, accumulation_steps=8)
    no_sync["metrics"]["allreduce_calls_per_step"] = 4.0
    v = claims.evaluate(next(c for c in claims.CLAIMS if c.id == "accumulation-fewer-allreduces"), [article, no_sync])
    assert v["verdict"] == claims.FAILS and v["effect"] == "32 vs 4 all-reduces per step"


def test_claims_cli_and_report_section(tmp_path, capsys):
    from bench import report
    from bench.cli import main
    assert main(["claims", str(FIXTURES)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n| ") >= 13 and "seed-table" in out
    assert "## The articles' claims, checked on this machine" in report.render(_records())
    json.dumps(claims.table(_records()))  # plain data, storable
