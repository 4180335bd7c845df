"""The sentences the analysis writes about measurements (a claim's evidence, where a noise figure came
from, why a run cannot be judged), kept as a key and its values, so a report renders them in English
or in Chinese. Records and JSON keep the English text."""
from __future__ import annotations

from dataclasses import dataclass, field

TEMPLATES = {
    "en": {
        "where": "{gpus} GPU(s), {a} -> {b}",
        "pair": "{where}: {ips_a} -> {ips_b} images/s, {noise}",
        "noise": "noise +-{pct}%",
        "no_noise": "no noise to judge by",
        "with_source": "{text} ({source})",
        "both": "both {why}",
        "side": "{side} {why}",
        "assumed_spread": ("assumed +-{pct}%: the largest spread of {n} processes of this configuration on {machine} "
                           "up to its run, {where}"),
        "case_run": "{name}, run {run}",
        "floor_run": "noise floor of run {run}",
        "assumed_default": "assumed +-{pct}%: the default for a {kind} case, no run of {n}+ processes of this "
                           "configuration stored on {machine} before it",
        "older": "older definition",
        "unreliable_run": "run {run} is unreliable: {why}",
        "gpu_shared": "GPU shared while {which} ran ({seen}): not judged",
        "experiment": "{where}: {effect}, judged by {n} interleaved pair(s) of fresh processes in run {run}{more}",
        "reworded_detail": "judged `{was}` when measured, by the rule of that day (an interval above zero held "
                           "however small); today's rule reads the same interval as `{now}`",
        "pairs_basis": "{n} pair(s)",
        "own_intervals": "own intervals",
        "exact_count": "an exact count",
        "on_gpus": "{pair}, {n} GPU(s)",
        "more_pairs_detail": "about {n} more pair(s) would decide it",
        "budget spent": "the claims' budget was spent before it was decided",
        "budget_next_round": "the next round (about {next}) would pass the claims' budget of {budget} ({spent} spent)",
        "rounds spent": "the rounds ran out before it was decided",
        "interrupted": "the run was interrupted before it was decided",
        "older_records": "{n} stored record(s) of its cases are of an older metric definition (newest {date}), shown "
                         "but never judged; run {sweep} again",
        "failed_records": "its cases ran here and failed ({counts}; newest {date}), so no pair was stored; run {sweep} "
                          "again",
        "status_count": "{n} {status}",
        "status:timeout": "timed out",
        "status:oom": "out of memory",
        "status:error": "error",
        "status:skipped": "skipped",
        "no_stored_pair": "no stored pair on this machine; run {sweep}",
        "run_only": "run {sweep}",
        "the_sweep": "the {sweep} sweep",
        "the_sweep_gpus": "the {sweep} sweep on {n} or more GPUs",
        "seed_sweep_2_4": "the seed sweep on 2 and 4 GPUs",
        "floor_too_wide": "its noise floor's process-to-process sd is {sd}% over {n} processes, above the {limit}% a "
                          "verdict can be judged by",
        "floor_moved": "its noise floor moved {drift}% between the run's start and end, {limit}% or more: the machine "
                       "changed under it",
        "needs_gpus": "it needs {n} or more GPUs and only fewer are stored",
        "no_pair_differing": "no pair differing only in {knobs} ({refused})",
        "also_differ": "{a} -> {b} at {gpus} GPU(s) also differ in {fields}",
        "no_pair": "no stored pair",
        "run_sweep": "{why}; run the {sweep} sweep",
        "either": "{a} or {b}",
        "both_names": "{a} and {b}",
        "then": "; {notes}",
        "run_sweep_gpus": "{why}; run the {sweep} sweep on {n} or more GPUs",
        "no_allreduce_count": "no all-reduce count stored",
        "allreduces": "{where}: the article's loop ran {na} bucket all-reduces per optimizer step over {k} "
                      "micro-batches; with no_sync() {nb}",
        "gpus_not_stored": "{n} GPUs: not stored",
        "gpus_measured": "{n} GPUs: {delta}% measured ({noise}) against +{published}% published",
        "table_not_run": "{parts} (run the seed sweep; 4 GPUs need a 4-GPU machine)",
        "table_judged": "{parts} (direction judged against noise; hardware differs from the article's)",
        "not_judged": "shown, not judged: no interval of its own for {which} (measure it in 2+ processes, or let "
                      "the sweep's claim experiments pair it)",
    },
    "zh": {
        "where": "{gpus} 个 GPU，{a} -> {b}",
        "pair": "{where}：{ips_a} -> {ips_b} 图像/秒，{noise}",
        "noise": "噪声 ±{pct}%",
        "no_noise": "没有可据以判断的噪声",
        "with_source": "{text}（{source}）",
        "both": "两者均为{why}",
        "side": "{side} 为{why}",
        "assumed_spread": "假定 ±{pct}%：截至其运行时 {machine} 上同一配置 {n} 个进程的最大离散度，{where}",
        "case_run": "{name}，运行 {run}",
        "floor_run": "运行 {run} 的噪声底",
        "assumed_default": "假定 ±{pct}%：{kind} 用例的默认值，此前 {machine} 上尚未保存过该配置 {n} 个以上进程的运行",
        "older": "旧的指标定义",
        "unreliable_run": "运行 {run} 不可靠：{why}",
        "gpu_shared": "{which} 运行时 GPU 被共享（{seen}）：不作判定",
        "experiment": "{where}：{effect}，由运行 {run} 中 {n} 对交错的新进程判定{more}",
        "reworded_detail": "测量时按当时的规则判定为“{was}”（区间高于零即成立，无论多小）；按现行规则，同一区间为“{now}”",
        "pairs_basis": "{n} 对",
        "own_intervals": "各自的区间",
        "exact_count": "精确计数",
        "on_gpus": "{pair}，{n} 块 GPU",
        "more_pairs_detail": "约再需 {n} 对即可判定",
        "budget spent": "判定之前论断实验的时间预算已用完",
        "budget_next_round": "下一轮（约 {next}）将超出论断实验的时间预算 {budget}（已用 {spent}）",
        "rounds spent": "判定之前轮数已用完",
        "interrupted": "判定之前运行被中断",
        "older_records": "其用例有 {n} 条已保存记录按旧的指标定义测得（最新 {date}），仅显示、从不判定；请重新运行{sweep}",
        "failed_records": "其用例在本机运行过但失败了（{counts}；最新 {date}），因此没有保存配对；请再次运行{sweep}",
        "status_count": "{n} 条{status}",
        "status:timeout": "超时",
        "status:oom": "内存不足",
        "status:error": "出错",
        "status:skipped": "跳过",
        "no_stored_pair": "本机没有已保存的配对；请运行{sweep}",
        "run_only": "请运行{sweep}",
        "the_sweep": " {sweep} 扫描",
        "the_sweep_gpus": "在 {n} 块或更多 GPU 上的 {sweep} 扫描",
        "seed_sweep_2_4": "在 2 块和 4 块 GPU 上的 seed 扫描",
        "floor_too_wide": "其噪声底在 {n} 个进程间的标准差为 {sd}%，高于可据以判断的 {limit}%",
        "floor_moved": "其噪声底在运行开始与结束之间变化了 {drift}%，达到或超过 {limit}%：机器在运行期间发生了变化",
        "needs_gpus": "需要 {n} 个或更多 GPU，而已保存的结果只有更少的 GPU",
        "no_pair_differing": "没有仅在 {knobs} 上不同的配对（{refused}）",
        "also_differ": "{gpus} 个 GPU 上的 {a} -> {b} 还在 {fields} 上不同",
        "no_pair": "没有已保存的配对",
        "run_sweep": "{why}；请运行 {sweep} 扫描",
        "either": "{a} 或 {b}",
        "both_names": "{a} 和 {b}",
        "then": "；{notes}",
        "run_sweep_gpus": "{why}；请在 {n} 个或更多 GPU 上运行 {sweep} 扫描",
        "no_allreduce_count": "未保存 all-reduce 次数",
        "allreduces": "{where}：文章的循环在 {k} 个微批次的每个优化器步中执行了 {na} 次桶 all-reduce；"
                      "使用 no_sync() 时为 {nb} 次",
        "gpus_not_stored": "{n} 个 GPU：未保存",
        "gpus_measured": "{n} 个 GPU：实测 {delta}%（{noise}），文章公布 +{published}%",
        "table_not_run": "{parts}（请运行 seed 扫描；4 个 GPU 需要一台 4-GPU 机器）",
        "table_judged": "{parts}（方向按噪声判断；硬件与文章不同）",
        "not_judged": "仅展示，不作判断：{which} 没有自身的区间（请用 2 个以上进程测量，或由扫描的论断实验配对测量）",
    },
}
SEPARATOR = {"en": "; ", "zh": "；"}


@dataclass(frozen=True)
class Phrase:
    """One sentence (or part of one) by key; a value may itself be a Phrase or a list of them (joined)."""
    key: str
    values: dict = field(default_factory=dict)

    def text(self, lang: str = "en") -> str:
        return TEMPLATES.get(lang, TEMPLATES["en"])[self.key].format(
            **{k: render(v, lang) for k, v in self.values.items()})

    def __str__(self) -> str:
        return self.text()


def phrase(key: str, **values) -> Phrase:
    return Phrase(key, values)


VERDICT_ZH = {"holds": "成立", "does not hold": "不成立", "inconclusive": "无法判定",
              "cannot be measured here": "此处无法测量", "inconclusive (GPU shared)": "无法判定（GPU 被共享）"}
for _word, _zh in VERDICT_ZH.items():  # a verdict word inside a sentence, in the sentence's language
    TEMPLATES["en"][f"v:{_word}"] = _word
    TEMPLATES["zh"][f"v:{_word}"] = _zh


def verdict_word(verdict: str):
    """A verdict as a phrase (rendered in the report's language), or the text itself where unknown."""
    return phrase(f"v:{verdict}") if f"v:{verdict}" in TEMPLATES["en"] else verdict


def render(value, lang: str = "en") -> str:
    """A Phrase, a list of them (joined as the language joins clauses) or a plain value, as text."""
    if isinstance(value, Phrase):
        return value.text(lang)
    if isinstance(value, list):
        return SEPARATOR.get(lang, "; ").join(render(v, lang) for v in value)
    return str(value)
