"""The words of `bench feed` and of its answer line, in English and in Chinese; i18n.TEXT holds them
with every other phrase of the report (read through i18n.t)."""
from __future__ import annotations

FEED_TEXT = {
    "en": {
        "feed_title": "Can this host feed {n} x {gpu}? Input side only: loader ranks on this host, no GPU trained",
        "feed_pace": "one {gpu} trains {model} at {ips} images/s ({source})",
        "feed_pace_stored": "its fastest stored one-GPU figure: {label}, run {run} on {machine}",
        "feed_pace_flag": "as given by --per-gpu",
        "feed_no_pace": "no one-GPU figure of {model} on {gpu} is stored: give --per-gpu IMAGES_PER_S to judge "
                        "the ladder; its figures stand as measured",
        "feed_fed": "{loader}, {reads}: feeds {r} x {gpu} at full speed ({ips} images/s, {need} needed; {threads} "
                    "workers or threads per rank)",
        "feed_fed_all": "{loader}, {reads}: feeds {r} x {gpu} at full speed, the most measured ({ips} images/s, "
                        "{need} needed; {threads} workers or threads per rank); more ranks were not tried",
        "feed_none": "{loader}, {reads}: feeds no {gpu} at full speed (1 rank: {ips} of the {need} images/s one needs)",
        "feed_unjudged": "{loader}, {reads}: up to {r} rank(s), {ips} images/s at the most (no pace to judge by)",
        "feed_noise": "; at {r} {ranks} its interval cannot tell ({ips} against {need} images/s needed)",
        "feed_at": "; at {r} {ranks} {why}",
        "feed_undecided": "{loader}, {reads}: not decided even for 1 {gpu} (1 rank: {ips} against {need} images/s "
                          "needed, and {why})",
        "feed_why": {"no interval": "it ran in one process, so it has no interval to judge by",
                     "shared": "other work shared the host during its windows: not judged",
                     "undrained": "its cold windows opened on batches queued while the cache was emptied (a record made "
                                  "before that was fixed): not judged, run it again",
                     "host normalized": "its ranks normalized every batch on the host, work a GPU rank does on its "
                                        "GPU (a record made before that was fixed): not judged, run it again"},
        "feed_why_noise": "its interval cannot tell",
        "feed_ci": " (95% interval {lo}-{hi})",
        "stop_cpu": "; at {r} {ranks} the host's CPUs stop it ({busy}% busy, {ips} of {need} images/s)",
        "stop_storage": "; at {r} {ranks} the storage stops it (cold {ips} against warm {warm} images/s, reading "
                        "{read} MB/s)",
        "stop_memory": "; at {r} {ranks} memory stops it ({reason})",
        "stop_failed": "; at {r} {ranks} it failed ({reason})",
        "stop_loader": "; at {r} {ranks} neither the CPUs ({busy}% busy) nor the storage ({read} MB/s) is full: "
                       "the loader's own settings stop it ({threads} workers or threads per rank, {ips} of {need} "
                       "images/s)",
        "feed_fits": "warm reads: the data set ({size} GB) fits in this host's memory ({memory} GB), so they came "
                     "from the page cache; --cold reads from storage, and `bench data make --gib` makes a set "
                     "larger than memory",
        "feed_cols": ["loader", "reads", "ranks", "images/s", "95% interval", "per rank", "needed", "verdict",
                      "host CPU busy %", "storage read MB/s", "workers or threads per rank"],
        "feed_loaders": {"torch": "torch DataLoader", "dali-cpu": "DALI CPU pipeline",
                         "dali-mixed": "DALI mixed (decode on the GPU)"},
        "feed_reads": {False: "warm reads", True: "cold reads"},
        "feed_verdicts": {"feeds": "feeds", "short": "too slow", "within noise": "within noise", "failed": "failed",
                          "no interval": "no interval (1 process)", "no pace": "-",
                          "shared": "not judged (host shared)", "undrained": "not judged (cold queue not drained)",
                          "host normalized": "not judged (normalized on the host)"},
        "feed_answer": "Feeding GPUs from this host (bench feed, run {run}; input side only, no GPU trained):",
        "feed_answer_runs": "Feeding GPUs from this host (bench feed, runs {run}; input side only, no GPU trained):",
    },
    "zh": {
        "feed_title": "这台主机能否喂饱 {n} 块 {gpu}？仅输入侧：本机上的加载进程，无 GPU 训练",
        "feed_pace": "一块 {gpu} 训练 {model} 的速度为 {ips} 图像/秒（{source}）",
        "feed_pace_stored": "已存的最快单 GPU 数据：{label}，运行 {run}，机器 {machine}",
        "feed_pace_flag": "由 --per-gpu 给出",
        "feed_no_pace": "未存有 {model} 在 {gpu} 上的单 GPU 数据：请用 --per-gpu IMAGES_PER_S 给出速度以作判断；"
                        "各项数据按实测列出",
        "feed_fed": "{loader}，{reads}：可全速喂饱 {r} 块 {gpu}（{ips} 图像/秒，需要 {need}；每进程 {threads} 个工作进程或线程）",
        "feed_fed_all": "{loader}，{reads}：可全速喂饱 {r} 块 {gpu}，即所测最多（{ips} 图像/秒，需要 {need}；每进程 {threads} "
                        "个工作进程或线程）；更多进程未测",
        "feed_none": "{loader}，{reads}：一块 {gpu} 也喂不饱（1 个进程：{ips}，一块需要 {need} 图像/秒）",
        "feed_unjudged": "{loader}，{reads}：最多 {r} 个进程，至多 {ips} 图像/秒（无速度可作判断）",
        "feed_noise": "；{r} 个进程时区间无法判断（{ips}，需要 {need} 图像/秒）",
        "feed_at": "；{r} 个进程时{why}",
        "feed_undecided": "{loader}，{reads}：连 1 块 {gpu} 也无法判断（1 个进程：{ips}，需要 {need} 图像/秒，{why}）",
        "feed_why": {"no interval": "只运行了 1 个进程，没有可作判断的区间",
                     "shared": "测量窗口内主机有其他工作：未判断",
                     "undrained": "冷读窗口开始时队列里已有清空缓存期间备好的批次（修正之前的记录）：未判断，请重新运行",
                     "host normalized": "各进程在主机上归一化每个批次，而 GPU 训练进程在 GPU 上做这一步（修正之前的记录）："
                                        "未判断，请重新运行"},
        "feed_why_noise": "区间无法判断",
        "feed_ci": "（95% 区间 {lo}-{hi}）",
        "stop_cpu": "；{r} 个进程时受限于主机 CPU（占用 {busy}%，{ips}/{need} 图像/秒）",
        "stop_storage": "；{r} 个进程时受限于存储（冷读 {ips}，热读 {warm} 图像/秒，读取 {read} MB/秒）",
        "stop_memory": "；{r} 个进程时受限于内存（{reason}）",
        "stop_failed": "；{r} 个进程时失败（{reason}）",
        "stop_loader": "；{r} 个进程时 CPU（占用 {busy}%）与存储（{read} MB/秒）均未饱和：受限于加载器自身设置"
                       "（每进程 {threads} 个工作进程或线程，{ips}/{need} 图像/秒）",
        "feed_fits": "热读：数据集（{size} GB）小于本机内存（{memory} GB），读取来自页缓存；--cold 从存储读取，"
                     "`bench data make --gib` 可生成大于内存的数据集",
        "feed_cols": ["加载器", "读取", "进程数", "图像/秒", "95% 区间", "每进程", "所需", "结论",
                      "主机 CPU 占用 %", "存储读取 MB/秒", "每进程工作进程或线程"],
        "feed_loaders": {"torch": "torch DataLoader", "dali-cpu": "DALI CPU 流水线",
                         "dali-mixed": "DALI mixed（GPU 解码）"},
        "feed_reads": {False: "热读", True: "冷读"},
        "feed_verdicts": {"feeds": "喂得饱", "short": "太慢", "within noise": "在噪声之内", "failed": "失败",
                          "no interval": "无区间（1 个进程）", "no pace": "-",
                          "shared": "未判断（主机被共享）", "undrained": "未判断（冷读队列未清空）",
                          "host normalized": "未判断（在主机上归一化）"},
        "feed_answer": "本机喂 GPU 的能力（bench feed，运行 {run}；仅输入侧，无 GPU 训练）：",
        "feed_answer_runs": "本机喂 GPU 的能力（bench feed，运行 {run}；仅输入侧，无 GPU 训练）：",
    },
}
