import copy
import json

import pytest

from bench.analysis import claims
from bench.store import query, record
from stored import FIXTURES, current, fixture_dicts


def _base(gpus=2):
    return next(r for r in fixture_dicts() if r["case"]["name"] == "seed-baseline" and r["case"]["gpus"] == gpus)


def _variant(rec, name, ips, half_pct=1.0, **case):
    r = copy.deepcopy(rec)
    r["case"].update(name=name, **case)
    r["case_id"] = name + "-" + "-".join(f"{k}{v}" for k, v in sorted(case.items()))
    r[record.READ_PATH] = f"/results/{r['case_id']}.json"
    r["metrics"].update(images_per_s=ips, images_per_s_min=ips * 0.99, images_per_s_max=ips * 1.01)
    return query.wrap(current(r, half_pct))


def _claim(cid):
    return next(c for c in claims.CLAIMS if c.id == cid)


def test_every_claim_is_data_with_a_source_cases_and_its_knobs():
    ids = [c.id for c in claims.CLAIMS]
    assert len(ids) == len(set(ids)) >= 12
    for c in claims.CLAIMS:
        assert c.source.startswith("article ") and c.claim and (c.change or c.kind == "table")
        assert c.knobs or c.kind == "table"


def test_seed_table_claim_against_the_fixture_figures():
    v = claims.evaluate(_claim("seed-table"), [query.wrap(r) for r in fixture_dicts()])
    assert v["verdict"] == claims.HOLDS
    assert "2 GPUs: +11.1% measured (noise +-1.4%) against +11.1% published" in v["evidence"]
    assert "4 GPUs: +40.1% measured" in v["evidence"] and len(v["files"]) == 4


@pytest.mark.parametrize("after, half, verdict", [
    (1100.0, 1.0, claims.HOLDS),         # +10% against +-1.4% combined noise
    (1005.0, 1.0, claims.FAILS),         # +0.5%: even +1.9% would be below the 3% a speed-up needs
    (1005.0, 5.0, claims.INCONCLUSIVE),  # the same change inside +-7.1% noise: cannot tell
    (1200.0, 30.0, claims.INCONCLUSIVE), # +20% inside +-42% (a torch loader with a 160% spread)
    (900.0, 1.0, claims.FAILS),          # slower beyond noise
])
def test_claim_verdicts_respect_the_combined_noise(after, half, verdict):
    base = _base()
    recs = [_variant(base, "ablation-02-pin-memory", 1000.0, half), _variant(base, "ablation-03-non-blocking", after, half,
                                                                            non_blocking=True)]
    v = claims.evaluate(_claim("non-blocking"), recs)
    assert v["verdict"] == verdict, v
    assert v["files"] == [recs[0].path, recs[1].path]  # both files named


def test_a_pair_differing_in_another_knob_is_refused():
    base = _base()
    recs = [_variant(base, "ablation-02-pin-memory", 1000.0),
            _variant(base, "ablation-03-non-blocking", 1300.0, non_blocking=True, precision="bf16")]
    v = claims.evaluate(_claim("non-blocking"), recs)
    assert v["verdict"] == claims.CANNOT
    assert "no pair differing only in non_blocking" in v["evidence"] and "also differ in precision" in v["evidence"]


def test_records_under_an_older_definition_are_not_judged_unless_asked():
    base = _base()
    old = [query.wrap({**r.data, "schema": 1, "definitions": None, "metrics": {
        k: v for k, v in r.data["metrics"].items() if k != "images_per_s_ci95"}})
        for r in (_variant(base, "ablation-00-baseline", 500.0), _variant(base, "ablation-01-num-workers", 1000.0, num_workers=8))]
    assert not old[0].current
    assert claims.evaluate(_claim("workers"), old)["verdict"] == claims.CANNOT
    assert claims.evaluate(_claim("workers"), old, include_old=True)["verdict"] == claims.HOLDS


def test_a_multi_gpu_claim_is_not_judged_on_one_gpu():
    base = _base()
    one = [_variant(base, "ablation-03-non-blocking", 800.0, gpus=1),
           _variant(base, "ablation-04-dp-free-memory-gpus", 700.0, gpus=1, dp_device_selection="free_memory")]
    c = _claim("dp-free-memory")
    v = claims.evaluate(c, one)
    assert v["verdict"] == claims.CANNOT
    assert v["evidence"] == "it needs 2 or more GPUs and only fewer are stored; run the ablation sweep on 2 or more GPUs"
    two = [_variant(base, "ablation-03-non-blocking", 800.0),
           _variant(base, "ablation-04-dp-free-memory-gpus", 700.0, dp_device_selection="free_memory")]
    assert claims.evaluate(c, two)["verdict"] == claims.FAILS  # slower on 2 GPUs: judged


def test_accumulation_all_reduce_claim_reads_the_counts():
    base = _base()
    article = _variant(base, "ddp-accumulate-article", 900.0, accumulation_steps=8)
    article.data["metrics"]["allreduce_calls_per_step"] = 32.0
    no_sync = _variant(base, "ddp-accumulate-no_sync", 910.0, accumulation_steps=8, accumulation_mode="no_sync")
    no_sync.data["metrics"]["allreduce_calls_per_step"] = 4.0
    v = claims.evaluate(_claim("accumulation-fewer-allreduces"), [article, no_sync])
    assert v["verdict"] == claims.FAILS and v["effect"] == "32 vs 4 all-reduces per step"


def test_claims_are_never_pooled_across_machines():
    base = _base()
    a = _variant(base, "ablation-02-pin-memory", 1000.0)
    b = query.wrap({**_variant(base, "ablation-03-non-blocking", 1100.0, non_blocking=True).data, "machine": "other"})
    with pytest.raises(ValueError, match="per machine"):
        claims.table([a, b])


def test_claims_cli_and_report_section(tmp_path, capsys):
    from bench.present import report
    from bench.cli.main import main
    assert main(["claims", str(FIXTURES), "--commit", "a1b2c3d4e5f6"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## 4x-nvidia-geforce-rtx-3090, commit a1b2c3d4e5f6")
    assert out.count("\n| ") >= 13 and "seed-table" in out
    assert "older metric definition" in out  # the schema-1 fixtures are labelled, not judged
    assert "| holds" not in out
    recs = [query.wrap(r) for r in fixture_dicts()]
    assert "## The articles' claims, checked on this machine and commit" in report.render(recs)
    json.dumps(claims.table(recs))  # plain data, storable


def test_every_evidence_sentence_has_chinese_words_with_the_same_values():
    import string

    from bench.core.phrases import TEMPLATES

    def fields(template):
        return sorted(f for _, f, _, _ in string.Formatter().parse(template) if f)
    assert set(TEMPLATES["zh"]) == set(TEMPLATES["en"])
    for key, en in TEMPLATES["en"].items():
        assert fields(TEMPLATES["zh"][key]) == fields(en), key


def test_the_chinese_report_writes_its_evidence_in_chinese():
    """The claims' evidence, the noise it used and why a pair is missing, translated through; the English
    report's sentences are the same words as the records' `evidence`."""
    from pathlib import Path

    from bench.present import report
    from bench.store import query
    recs, _ = query.load([Path(__file__).resolve().parents[1] / "results" / "1x-nvidia-h200" / "834f1c7db0c6"])
    zh = report.render(recs, "zh")
    evidence = " ".join(zh.split("证据:")[1].split("比较的文件")[0].split())  # the wrapped lines as one text
    assert "1 个 GPU，ablation-00-baseline -> ablation-01-num-workers：" in evidence
    assert "图像/秒，仅展示，不作判断" in evidence and "没有已保存的配对；请在 2 个或更多 GPU 上运行 strategies 扫描" in evidence
    assert "请在 2 个或更多 GPU 上运行 ablation 或 scaling 扫描" in evidence and "(文章 2，结尾一节)" in evidence
    for english in ("images/s", "noise +-", "no stored pair", "run the", "assumed +-", "or more GPUs", " or ",
                    "article", "section"):
        assert english not in evidence, english
    en = " ".join(report.render(recs, "en").split())
    for _, e in claims.evaluations(recs):  # the English report says what the records' evidence says
        assert " ".join(e["evidence"].split()) in en


def test_an_answer_without_evidence_says_why_older_records_cannot_give_one():
    """Records of a claim's cases made under an older metric definition are counted in its answer, with the
    newest one's date and the sweep to run again, instead of 'no stored pair'."""
    from bench.analysis import answers
    from stored import fixture_records
    old = [r for r in fixture_records(upgrade=False) if r.case["name"] in ("seed-baseline", "seed-optimized")]
    assert old and not any(r.current for r in old)
    seed = next(a for a in answers.answers(old) if a.claim.id == "seed-table")
    newest = max(r.started_at for r in old if r.ok)[:10]
    assert seed.verdict == "cannot be measured here" and seed.hint.text() == (
        f"{sum(r.ok for r in old)} stored record(s) of its cases are of an older metric definition (newest {newest}), "
        "shown but "
        "never judged; run the seed sweep on 2 and 4 GPUs again")
    workers = next(a for a in answers.answers(old) if a.claim.id == "workers")
    assert workers.hint.text() == "no stored pair on this machine; run the ablation sweep"
    assert seed.hint.text("zh").startswith(f"其用例有 {sum(r.ok for r in old)} 条已保存记录按旧的指标定义测得")


def test_an_answer_whose_cases_ran_and_failed_says_so_not_that_nothing_was_stored():
    """A recipe that ran on this machine and never ended ok (both accumulation cases timing out on a CPU without
    bf16) gives 'ran here and failed', with the statuses counted, instead of 'no stored pair'."""
    from bench.analysis import answers
    from stored import fixture_dicts
    from bench.core import sweeps
    dp = next(d for d in fixture_dicts() if d["status"] == "ok" and d["case"]["gpus"] == 2)
    recipes = {c.name: c for c in sweeps.build("strategies", 2) if c.gpus == 2}
    made = []
    for name, status, day in (("ddp", "ok", "01"), ("ddp-accumulate-article", "timeout", "02"),
                              ("ddp-accumulate-no_sync", "timeout", "03"), ("ddp-accumulate-no_sync", "error", "04")):
        r = copy.deepcopy(dp)
        r["case"], r["status"], r["started_at"] = recipes[name].to_dict(), status, f"2026-12-{day}T00:00:00+00:00"
        made.append(query.wrap(r))
    faster = next(a for a in answers.answers(made) if a.claim.id == "accumulation-faster")
    assert faster.verdict == "cannot be measured here"
    assert faster.hint.text() == ("its cases ran here and failed (1 error; 2 timed out; newest 2026-12-04), so no pair "
                                  "was stored; run the strategies sweep on 2 or more GPUs again")
    assert faster.hint.text("zh").startswith("其用例在本机运行过但失败了（1 条出错；2 条超时；最新 2026-12-04）")
    # one of them ended ok once: the pair is missing for another reason, and nothing is said of failures
    made[1] = query.wrap({**made[1].data, "status": "ok"})
    made[2] = query.wrap({**made[2].data, "status": "ok"})
    faster = next(a for a in answers.answers(made) if a.claim.id == "accumulation-faster")
    assert faster.verdict != "cannot be measured here" and not faster.hint
