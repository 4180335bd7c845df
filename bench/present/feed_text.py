"""`bench feed`'s page: the answer (the largest N each loader feeds, what stops the next), the ladder's
table, and the answer again; every figure is the input side alone, and says so."""
from __future__ import annotations

from ..analysis.feed import Ladder, loader_threads
from ..core import untrusted
from ..core.labels import describe
from .i18n import t
from .text import fmt, table, wrap


def pace_line(lang: str, gpu: str, model: str, per_gpu: float | None, source) -> str:
    """What one GPU consumes, and where that figure came from (a stored record, or --per-gpu)."""
    if per_gpu is None:
        return t(lang, "feed_no_pace", model=model, gpu=gpu)
    if source is None:
        where = t(lang, "feed_pace_flag")
    else:
        where = t(lang, "feed_pace_stored", label=describe(source.case), run=source.run_id, machine=source.machine)
    return t(lang, "feed_pace", gpu=gpu, model=model, ips=fmt(per_gpu), source=where)


def answer_line(lang: str, ladder: Ladder, gpu: str) -> str:
    """One loader's answer: the largest N fed at full speed, then what stops the next R."""
    words = {"loader": t(lang, "feed_loaders")[ladder.loader], "reads": t(lang, "feed_reads")[ladder.cold], "gpu": gpu}
    fed = next((g for g in ladder.rungs if g.ranks == ladder.largest), None)
    top = ladder.rungs[-1]
    if ladder.stop.get("kind") == "none" and top.need is None:
        best = max((g.record.images_per_s or 0 for g in ladder.rungs), default=0)
        return t(lang, "feed_unjudged", r=top.ranks, ips=fmt(best), **words)
    if fed is None:
        first = ladder.rungs[0]
        key = "feed_none" if ladder.decided else "feed_undecided"
        why = t(lang, "feed_why").get(first.verdict) or t(lang, "feed_why_noise")
        # within noise, its interval is what cannot tell; decided, the stop that follows at this rung gives it
        ips = judged(lang, first.record.images_per_s, first.record.ci95) if first.verdict == "within noise" else fmt(
            first.record.images_per_s)
        return t(lang, key, ips=ips, need=fmt(first.need), why=why, **words) + (
            stop_text(lang, ladder) if ladder.decided else "")
    key = "feed_fed_all" if ladder.stop.get("kind") == "none" else "feed_fed"
    return t(lang, key, r=fed.ranks, ips=judged(lang, fed.record.images_per_s, fed.record.ci95), need=fmt(fed.need),
             threads=threads_of(fed.record), **words) + stop_text(lang, ladder)


def judged(lang: str, ips: float | None, ci95) -> str:
    """A rung's figure with the 95% interval its verdict was judged by, where it has one."""
    return fmt(ips) + (t(lang, "feed_ci", lo=fmt(ci95[0]), hi=fmt(ci95[1])) if ci95 else "")


def stop_text(lang: str, ladder: Ladder) -> str:
    s = ladder.stop
    if s.get("kind") in (None, "none"):
        return ""
    rank_word = "rank" if s.get("ranks") == 1 else "ranks"  # English only: the Chinese has no plural
    if not ladder.decided:
        why = t(lang, "feed_why").get(s.get("verdict"))  # the same reason the first rung's answer gives
        if why:
            return t(lang, "feed_at", r=s["ranks"], ranks=rank_word, why=why)
        return t(lang, "feed_noise", r=s["ranks"], ranks=rank_word,
                 ips=judged(lang, s.get("images_per_s"), s.get("ci95")), need=fmt(s.get("need")))
    pct = "-" if s.get("busy_pct") is None else f"{s['busy_pct']:.0f}"
    return t(lang, f"stop_{s['kind']}", r=s["ranks"], ranks=rank_word, busy=pct,
             ips=judged(lang, s.get("images_per_s"), s.get("ci95")), need=fmt(s.get("need")),
             read=fmt(s.get("read_mb_per_s")), warm=judged(lang, s.get("warm_images_per_s"), s.get("warm_ci95")),
             threads=s.get("threads") or "-", reason=untrusted.clean(str(s.get("reason", "")))[:160])


def threads_of(r) -> str:
    threads = loader_threads(r)
    return "-" if threads is None else str(threads)


def rows(lang: str, ladders: list[Ladder]) -> list[list[str]]:
    out = []
    for ladder in ladders:
        for g in ladder.rungs:
            r, m = g.record, g.record.metrics
            ci = r.ci95
            out.append([t(lang, "feed_loaders")[ladder.loader], t(lang, "feed_reads")[ladder.cold], str(g.ranks),
                        fmt(r.images_per_s) if r.ok else r.status, f"{fmt(ci[0])} - {fmt(ci[1])}" if ci else "-",
                        fmt(r.images_per_s / g.ranks) if r.ok else "-", fmt(g.need),
                        t(lang, "feed_verdicts")[g.verdict], fmt(m.get("host_cpu_busy_pct")),
                        fmt(m.get("storage_read_mb_per_s")), threads_of(r)])
    return out


def answers(lang: str, ladders: list[Ladder], gpu: str) -> list[str]:
    lines = [answer_line(lang, ladder, gpu) for ladder in ladders]
    fits = next((ladder for ladder in ladders if not ladder.cold and ladder.fits_in_memory), None)
    if fits:
        lines.append(t(lang, "feed_fits", size=f"{fits.data_set_bytes / 1e9:.2g}",
                       memory=f"{fits.host_memory_bytes / 1e9:.0f}"))
    return lines


def render(lang: str, ladders: list[Ladder], n: int, gpu: str, model: str, per_gpu: float | None, source) -> str:
    """The answer first, the table, the answer again last: what a user scrolls to either end for."""
    head = [t(lang, "feed_title", n=n, gpu=gpu), pace_line(lang, gpu, model, per_gpu, source)]
    said = [ln for a in answers(lang, ladders, gpu) for ln in wrap("- " + a)]
    body = table(rows(lang, ladders), t(lang, "feed_cols"))
    return "\n".join([*head, *said, "", body, "", *head[:1], *said])
