"""`bench compare` as text: every case with its change, noise and verdict."""
from __future__ import annotations

from ..analysis.compare import Comparison
from .text import fit, wrap


def _num(x, shared: str = ""):
    return "-" if x is None else f"{x:,.1f}" + (f" ({shared})" if shared else "")


def render(c: Comparison, wide: bool = False) -> str:
    """Every case with its change, noise and verdict; assumed noises marked and named below."""
    assumed = sorted({r["note"] for r in c.rows if "assumed" in r["note"]})
    table = [[r["case"], _num(r["a_images_per_s"], r.get("a_shared")), _num(r["b_images_per_s"], r.get("b_shared")),
              "-" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f}%",
              "-" if r["noise_pct"] is None else f"+-{r['noise_pct']:.1f}%"
              + (f" [n{assumed.index(r['note']) + 1}]" if r["note"] in assumed else ""), r["verdict"]] for r in c.rows]
    notes = [ln for i, text in enumerate(assumed, 1) for ln in wrap(f"[n{i}] {text}")]
    counts = ", ".join(f"{n} {v}" for v, n in sorted(c.summary()["counts"].items()))
    shown, ids = fit(table, ["case", "images/s a", "images/s b", "change", "noise (95%)", "verdict"], wide=wide)
    answer = f"{c.kind}, b against a: {counts}"  # the answer first, and again last, beside what it compared
    closing = [f"a: {c.a['label']}", f"b: {c.b['label']}",
               f"kind: {c.kind}; {counts}; each verdict weighs the change {c.method}"]
    return "\n".join([*wrap(answer), "", shown, *ids, *notes, "", *(ln for text in closing for ln in wrap(text))])
