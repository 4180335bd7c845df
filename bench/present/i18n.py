"""Every fixed word the report prints, in English and in Chinese (the second article's language and
its own table headings). The sentences the analysis writes (evidence, noise sources) come from
core/phrases.py in either language."""
from __future__ import annotations

import re

from .i18n_feed import FEED_TEXT

TEXT = {
    "en": {
        "group": "{machine}, commit {commit}",
        "answers_title": "Answers per machine",
        "contents": "Contents",
        "report_head": "# Benchmark report\n\nRendered by `bin/bench report` from the stored results only.",
        "seed_title": "Seed table: DataParallel baseline against the seed-optimized configuration (batch size global)",
        "best_title": "Baseline against the best configuration the suite knows (batch size global)",
        "seed_cols": ["GPUs", "Batch Size", "baseline (images/s)", "optimized (images/s)", "improvement"],
        "no_pair": "(no baseline or optimized case stored here: run the `seed` or `best` sweep)",
        "setting": "{model}, {px} px images, {batch} images per GPU",
        "unreliable": "WARNING: run {run} cannot be judged: {why}. Its figures are shown and its timings judged "
                      "inconclusive; {stand}.",
        "stand": "these verdicts need no noise and stand: {which}",
        "none_stand": "none of its verdicts stands",
        "not_run_gpus": "not run: needs {n} GPUs",
        "not_stored": "not stored",
        "failed": "failed: {status}",
        "missing_cell": "{n} GPU(s), {side}: {why}",
        "sides": ["baseline", "optimized"],
        "details_title": "Scaling efficiency, noise and configurations of the table above",
        "details_cols": ["GPUs", "baseline efficiency", "optimized efficiency", "baseline +-95%", "optimized +-95%"],
        "configs": "configurations: baseline = {b}; optimized = {o}",
        "summary_title": "Summary",
        "best_found": "best configuration found: {label}, {ips} images/s ({noise}, {k} process(es); {sweep} sweep)",
        "efficiency": "scaling efficiency of {name} at {n} GPUs: {eff}",
        "claims_count": "claims: {holds} hold, {fails} do not hold, {inconclusive} inconclusive, {cannot} cannot be measured here",
        "runs_title": "Runs and noise",
        "floor": "run {run}: noise floor {sd}% (process-to-process sd of {case} over {n} fresh processes at the start)",
        "floor_end": "; at the end {sd}% over {n}, median moved {drift}%",
        "interrupted": "; interrupted at {at} before its end (every case it finished is stored)",
        "no_floor": "run {run}: no noise floor measured; {k} process(es) per case",
        "runs_used": "runs used: the latest run of each case ({runs})",
        "old_defs": "{n} record(s) were made under an older metric definition and lack what today's needs: shown "
                    "(marked *), left out of verdicts",
        "rederived": "{n} record(s) made under an older metric definition were re-derived from their stored windows "
                     "(marked ^)",
        "targets_title": "Performance targets",
        "targets_cols": ["target", "needed", "measured", "status"],
        "claims_title": "The articles' claims, checked on this machine and commit",
        "claims_cols": ["claim", "verdict", "effect"],
        "evidence": "Evidence",
        "files": "Files compared (each is results/<folder><case id>/<run id>.json)",
        "cases_title": "Every case (stall: the device idle for input; --wide for every column; CSV keeps full case ids)",
        "cases_cols": ["sweep", "case", "GPUs", "images/s", "+-95%", "stall%", "bound by"],
        "profile_title": "Where the device's time went in profiled steps (`--profile-steps`)",
        "phases_title": "Where the time went (seconds, all processes of each case)",
        "phases_note": "start: interpreter and imports once let go, then device, model and loader; 1st step: "
                       "compilation, cuDNN autotuning; warm-up: warm-up and settling steps; windows: measured; end: the "
                       "windows that explain them, the record written, the process ended. Each record keeps the "
                       "seven phases apart (phases_s).",
        "phases_cols": ["case (processes)", "total", "start", "1st step", "warm-up", "windows", "end", "windows %"],
        "phases_total": "all processes",
        "case_notes": "Notes",
        "old_mark": "* older metric definition; ^ re-derived from its windows under today's",
        "plots_title": "Plots",
        "environment": "Environment",
        "history_title": "History: each machine's headline cases across its commits",
        "history_cols": ["commit", "run (started, UTC)", "sweep", "images/s", "95% interval", "note"],
        "history_noise": "The noise floor of every run",
        "noise_cols": ["commit", "run", "floor sd %", "processes", "end sd %", "median moved %"],
        "verdicts": {},
        # the answers (present/answers_text.py)
        "a_title": "## {machine}: the answers (latest evidence from {commits} commit(s))",
        "a_seed_none": "Seed table: not measured on this machine; `make bench` measures it.",
        "a_seed_head": "Seed table (commit {commit}, {day}; {model}, {px} px, {batch} images per GPU), images/s measured "
                       "here with the article's own figure in brackets (4x RTX 3090, PyTorch 2.1):",
        "a_seed_cols": ["GPUs", "baseline (article)", "optimized (article)", "improvement (article)",
                        "optimized efficiency"],
        "a_no_interval": " (no interval)",
        "a_fastest": "- Fastest measured at commit {commit}, {n} GPU(s): {name} ({config}), {ips} images/s {noise}, "
                     "{k} process(es)",
        "a_fastest_eager": "- Fastest eager (nothing compiled) at commit {commit}, {n} GPU(s): {name} ({config}), {ips} "
                           "images/s {noise}, {k} process(es)",
        "a_recipe": "- Its recipe for {n} GPU(s), from `bench recommend` run {run}: results/{recipe}",
        "a_no_recommend": "- `make recommend` never ran here: it searches this machine's own fastest set-up and writes it "
                          "as a script; until then the fastest is the recipe the suite knows from other machines",
        "a_claim_cols": ["claim", "verdict", "effect (95% interval)", "commit", "measured"],
        "a_evidence": "- {claim}: {pair}, {basis}, run {runs}",
        "a_hint": "- {claim}: {hint}",
        "gpu_shared_note": "GPU shared: {seen}",
        "host_shared_note": "host shared: {pct}% of its cores busy outside the run",
        "wide_seed": "Seed table, every column",
        "wide_cases": "Every case, every column",
        "a_earlier": ". Earlier: {verdict} ({effect}) at commit {commit}, {day}, {basis}",
        "a_for_model": " for {model}",
        "a_best": "Best configuration{of}:",
        "a_advice": "Does the articles' advice hold here{of}? {decided} of {n} claims decided; each verdict is the "
                    "latest decided one, judged by its own pairs or intervals and never changed by later runs:",
        "a_other_model": "- {model}: also answered on this machine; `bin/bench report --machine {machine}` shows every "
                         "model's",
        "a_none": "no stored results found",
        "page_title": "# {machine}: what its stored results answer",
        "page_generated": "Generated by `bin/bench report` (and at the end of `make bench`) from the results in this "
                          "folder; edits are overwritten.",
        "page_evidence": "## Where the evidence lies",
        "page_commit": "- {link} ({when}): {runs} run(s), sweeps {sweeps}",
        "page_recipes": "The latest winners of `bench recommend` as scripts to copy: {links}.",
    },
    "zh": {
        "group": "{machine}，提交 {commit}",
        "answers_title": "各机器的答案",
        "contents": "目录",
        "report_head": "# 基准测试报告\n\n由 `bin/bench report` 仅根据已保存的结果生成。",
        "seed_title": "种子表：DataParallel 基础配置与优化配置对比（Batch Size 为全局批大小）",
        "best_title": "基础配置与本套件已知最佳配置对比（Batch Size 为全局批大小）",
        "seed_cols": ["GPU数量", "Batch Size", "基础配置吞吐量", "优化后吞吐量", "提升比例"],
        "no_pair": "（此处没有存储基础或优化配置的结果：请运行 `seed` 或 `best` 扫描）",
        "setting": "{model}，{px} px 图像，每块 GPU {batch} 张",
        "unreliable": "警告：运行 {run} 无法判定：{why}。其数值仅供显示，其计时判定均为“无法判定”；{stand}。",
        "stand": "以下判定无需噪声，仍然成立：{which}",
        "none_stand": "其判定均无效",
        "not_run_gpus": "未运行：需要 {n} 块 GPU",
        "not_stored": "未存储",
        "failed": "失败：{status}",
        "missing_cell": "{n} 块 GPU，{side}：{why}",
        "sides": ["基础配置", "优化配置"],
        "details_title": "上表的扩展效率、噪声与配置",
        "details_cols": ["GPU数量", "基础配置效率", "优化配置效率", "基础配置 ±95%", "优化配置 ±95%"],
        "configs": "配置：基础 = {b}；优化 = {o}",
        "summary_title": "概要",
        "best_found": "找到的最佳配置：{label}，{ips} 图像/秒（{noise}，{k} 个进程；{sweep} 扫描）",
        "efficiency": "{name} 在 {n} 块 GPU 上的扩展效率：{eff}",
        "claims_count": "文章论断：{holds} 项成立，{fails} 项不成立，{inconclusive} 项无法判定，{cannot} 项在此无法测量",
        "runs_title": "运行与噪声",
        "floor": "运行 {run}：噪声基线 {sd}%（{case} 在开始时 {n} 个新进程之间的标准差）",
        "floor_end": "；结束时 {n} 个进程 {sd}%，中位数变化 {drift}%",
        "interrupted": "；于 {at} 在结束前被中断（已完成的用例均已保存）",
        "no_floor": "运行 {run}：未测量噪声基线；每个用例 {k} 个进程",
        "runs_used": "所用运行：每个用例的最新一次运行（{runs}）",
        "old_defs": "{n} 条记录按旧的指标定义测得，且缺少按现行定义重算所需的数据：仅显示（标 *），不参与判定",
        "rederived": "{n} 条按旧指标定义测得的记录已由其保存的测量窗口按现行定义重算（标 ^）",
        "targets_title": "性能目标",
        "targets_cols": ["目标", "要求", "测得", "状态"],
        "claims_title": "文章论断：在本机与本提交上的检验",
        "claims_cols": ["论断", "结论", "效果"],
        "evidence": "证据",
        "files": "比较的文件（每个为 results/<目录><用例 id>/<运行 id>.json）",
        "cases_title": "所有用例（停顿：设备等待输入的时间；--wide 显示全部列；CSV 保留完整用例编号）",
        "cases_cols": ["扫描", "用例", "GPU数量", "图像/秒", "±95%", "停顿 %", "瓶颈"],
        "profile_title": "剖析步中设备时间的去向（`--profile-steps`）",
        "phases_title": "时间花在哪里（秒，每个用例的全部进程）",
        "phases_note": "启动：放行后的解释器与导入，以及设备、模型、数据加载器；首步：编译、cuDNN 自动调优；预热：预热与稳定步；"
                       "计时窗口：被测量的部分；结束：解释计时窗口的附加窗口、写出记录、结束进程。每条记录分别保存七个阶段（phases_s）。",
        "phases_cols": ["用例（进程数）", "合计", "启动", "首步", "预热", "计时窗口", "结束", "计时窗口 %"],
        "phases_total": "全部进程",
        "case_notes": "说明",
        "old_mark": "* 旧的指标定义；^ 已由其测量窗口按现行定义重算",
        "plots_title": "图",
        "environment": "环境",
        "history_title": "历史：各机器的主要用例在其各次提交上的结果",
        "history_cols": ["提交", "运行（开始时间，UTC）", "扫描", "图像/秒", "95% 区间", "备注"],
        "history_noise": "每次运行的噪声底",
        "noise_cols": ["提交", "运行", "噪声底标准差 %", "进程数", "结束时标准差 %", "中位数变化 %"],
        "verdicts": {"holds": "成立", "does not hold": "不成立", "inconclusive": "无法判定",
                     "cannot be measured here": "此处无法测量", "input-bound": "输入受限",
                     "compute-bound": "计算受限", "host-bound": "主机受限", "communication-bound": "通信受限", "loader-only": "仅加载器",
                     "met": "达到", "missed": "未达到", "not measured": "未测量", "within noise": "在噪声之内",
                     "inconclusive (GPU shared)": "无法判定（GPU 被共享）"},
        "a_title": "## {machine}：答案（来自 {commits} 个提交的最新证据）",
        "a_seed_none": "种子表：本机尚未测量；`make bench` 会测量它。",
        "a_seed_head": "种子表（提交 {commit}，{day}；{model}，{px} px，每块 GPU {batch} 张图像），本机实测的 图像/秒，"
                       "括号内为文章自己的数字（4 块 RTX 3090，PyTorch 2.1）：",
        "a_seed_cols": ["GPU数量", "基础配置吞吐量（文章）", "优化后吞吐量（文章）", "提升比例（文章）", "优化配置效率"],
        "a_no_interval": "（无区间）",
        "a_fastest": "- 提交 {commit} 上 {n} 块 GPU 实测最快：{name}（{config}），{ips} 图像/秒 {noise}，{k} 个进程",
        "a_fastest_eager": "- 提交 {commit} 上 {n} 块 GPU 最快的即时执行（未编译）配置：{name}（{config}），{ips} 图像/秒 "
                           "{noise}，{k} 个进程",
        "a_recipe": "- {n} 块 GPU 的脚本，来自 `bench recommend` 运行 {run}：results/{recipe}",
        "a_no_recommend": "- 本机从未运行 `make recommend`：它会搜索本机自己最快的配置并写成脚本；在此之前，最快的是本套件在其他机器上得到的配方",
        "a_claim_cols": ["论断", "判定", "效果（95% 区间）", "提交", "测量日期"],
        "a_evidence": "- {claim}：{pair}，{basis}，运行 {runs}",
        "a_hint": "- {claim}：{hint}",
        "gpu_shared_note": "GPU 被共享：{seen}",
        "host_shared_note": "主机被共享：测量窗口内 {pct}% 的核心被本次运行之外的进程占用",
        "wide_seed": "种子表，全部列",
        "wide_cases": "所有用例，全部列",
        "a_earlier": "。此前：{verdict}（{effect}），提交 {commit}，{day}，{basis}",
        "a_for_model": "（{model}）",
        "a_best": "最佳配置{of}：",
        "a_advice": "文章的建议在这里成立吗{of}？{n} 项论断中已判定 {decided} 项；每项判定均为最新的已判定结果，"
                    "由其自身的配对或区间判定，之后的运行不会改变它：",
        "a_other_model": "- {model}：本机也有它的答案；`bin/bench report --machine {machine}` 会显示每个模型的答案",
        "a_none": "没有找到已保存的结果",
        "page_title": "# {machine}：已保存结果给出的答案",
        "page_generated": "由 `bin/bench report`（以及 `make bench` 结束时）根据本文件夹中的结果生成；手工修改会被覆盖。",
        "page_evidence": "## 证据所在",
        "page_commit": "- {link}（{when}）：{runs} 次运行，扫描 {sweeps}",
        "page_recipes": "`bench recommend` 最新的获胜配置，可直接复制的脚本：{links}。",
    },
}

# the claims in this project's own words (bench/claims.py), in Chinese
CLAIMS_ZH = {
    "workers": "更多的 DataLoader 工作进程（约等于核心数）能加快数据输入。",
    "pin-memory": "pin_memory=True 能加快主机到 GPU 的拷贝。",
    "non-blocking": "non_blocking=True 的拷贝与计算重叠，从而加快训练。",
    "accumulation-fewer-allreduces": "其梯度累积循环每 K 个微批次只做一次 all-reduce，而不是每个微批次一次。",
    "accumulation-faster": "梯度累积能隐藏通信，从而提高吞吐量。",
    "dp-free-memory": "按空闲显存选择 DataParallel 使用的 GPU 有帮助。",
    "dp-output-device": "在负载较轻的 GPU 上汇集输出能平衡 DataParallel。",
    "dp-loss-in-forward": "在 forward 中计算损失（只汇集标量）能加快 DataParallel。",
    "amp": "混合精度（AMP 与 GradScaler）能加快训练。",
    "dali": "NVIDIA DALI 能加快数据加载，从而加快训练。",
    "nccl-settings": "其 NCCL 设置（禁用 IB，调试级别为 WARN）能改善通信。",
    "ddp-over-dp": "DistributedDataParallel 的扩展性优于 DataParallel。",
    "seed-table": "在 4 块 RTX 3090 上，优化后的 DataParallel 配置在 2 块 GPU 上比基础配置快 11.1%，在 4 块上快 40.1%。",
}


def claim_text(lang: str, claim) -> str:
    return CLAIMS_ZH.get(claim.id, claim.claim) if lang == "zh" else claim.claim


def claim_source(lang: str, claim) -> str:
    """Where in the articles a claim stands: `article 2, section 3.1`, in Chinese `文章 2，第 3.1 节`."""
    if lang != "zh":
        return claim.source
    text = re.sub(r"article (\d+)", r"文章 \1", claim.source)
    return re.sub(r", section ([\d.]+)", r"，第 \1 节", text).replace(", closing section", "，结尾一节")


for _lang, _words in FEED_TEXT.items():
    TEXT[_lang].update(_words)


def t(lang: str, key: str, **values) -> str:
    text = TEXT[lang][key]
    return text.format(**values) if values else text


RECOMMEND_ZH = ((r"^recommend's synthetic winner, 1 GPU$", "recommend 的合成数据获胜配置，1 块 GPU"),
                (r"^recommend's JPEG-fed winner, (\d+) GPU\(s\)$", r"recommend 的 JPEG 输入获胜配置，\1 块 GPU"))


def recommend_label(lang: str, label: str) -> str:
    """A recommend winner's label (analysis/targets.recommend_rows) in the report's language."""
    if lang != "zh":
        return label
    for pattern, zh in RECOMMEND_ZH:
        if re.match(pattern, label):
            return re.sub(pattern, zh, label)
    return label


def recommend_shown(lang: str, text: str) -> str:
    """A recommend winner's figure (`run R: 6,260.1 images/s (95% interval a-b)`) in the report's language."""
    if lang != "zh":
        return text
    text = re.sub(r"fed (.+) against the synthetic winner's (.+)$", r"JPEG 输入 \1，对比合成数据获胜配置的 \2", text)
    return (text.replace(" images/s", " 图像/秒").replace("95% interval", "95% 区间").replace("no interval", "无区间")
            .replace("run ", "运行 ", 1))


def effect(lang: str, text: str) -> str:
    """A change with its interval (`+4.2% (+2.1% to +6.3%)`, `2 vs 1 all-reduces per step`) in the report's
    language."""
    if lang != "zh":
        return text
    return text.replace(" to ", " 至 ").replace(" vs ", " 对 ").replace(" all-reduces per step", " 次 all-reduce/步")


def word(lang: str, verdict: str) -> str:
    """A verdict or status word in the report's language."""
    return TEXT[lang]["verdicts"].get(verdict, verdict)
