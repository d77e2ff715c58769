"""Audit reports: JSON (exact, machine-readable), Markdown and one self-contained HTML page
with inline SVG plots (matplotlib).

Numbers in JSON are exact (``"a/b"`` strings); plots and percentages are for reading only and
are drawn from floats of the exact values, never used for any decision.
"""

from __future__ import annotations

import html
import io
import itertools
from collections import Counter
from fractions import Fraction
from typing import Any

from wevent.accounting.budget import approx, format_exact, ratio_text
from wevent.accounting.requirements import Dynamic, Fixed, Requirement, WholeStream
from wevent.verifier.audit import AuditResult
from wevent.verifier.sql import tightest_users

__all__ = ["closest_users", "histogram", "render_html", "render_markdown", "report_json"]

_BINS = (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)


def _util_text(x: Fraction | None) -> str:
    return "inf" if x is None else ratio_text(x)


def _percent(x: Fraction | None) -> str:
    if x is None:
        return "unbounded (positive spend against a zero bound)"
    note = " (over the bound)" if x > 1 else " (at the bound)" if x == 1 else ""
    return f"{approx(x * 100, 4)}%{note}"


def closest_users(result: AuditResult, k: int = 20) -> list[tuple[str, str, Fraction | None]]:
    """The k users closest to (or over) their bounds: (user, class, utilization)."""
    pop = result.population
    out = []
    for u in tightest_users(result.verdict, k):
        cls = pop.class_of(u).name if u in pop else "unregistered"
        out.append((u, cls, result.verdict.user_utilization[u]))
    return out


def histogram(result: AuditResult) -> dict[str, int]:
    """Users per utilization bin: ``[0%, 10%)``, ..., ``[90%, 100%]``, ``over 100%`` (exact
    comparisons)."""
    counts = {f"{lo}-{hi}%": 0 for lo, hi in itertools.pairwise(_BINS)}
    counts["over 100%"] = 0
    labels = list(counts)
    for x, n in Counter(result.verdict.user_utilization.values()).items():
        if x is None or x > 1:
            counts["over 100%"] += n
            continue
        k = min(int(x * 10), 9)  # exact floor of 10x; 100% falls in the last bin
        counts[labels[k]] += n
    return counts


def report_json(result: AuditResult) -> dict[str, Any]:
    """The audit as JSON: verdict, integrity, utilization summaries and spends over time."""
    v = result.verdict
    return {
        "ok": result.ok,
        "engine": result.engine,
        "inputs": list(result.inputs),
        "integrity": [i.to_json() for i in result.integrity],
        "verdict": {
            "ok": v.ok,
            "violations": [x.to_json() for x in v.violations],
            "evidence_failures": [e.to_json() for e in v.evidence_failures],
            "horizon": v.horizon,
            "per_user_charges": v.per_user_charges,
        },
        "utilization": {
            "classes": {k: _util_text(x) for k, x in sorted(v.class_utilization.items())},
            "closest_users": [
                {"user": u, "class": c, "utilization": _util_text(x)}
                for u, c, x in closest_users(result)
            ],
            "histogram": histogram(result),
            "users": len(v.user_utilization),
        },
        "spends_over_time": {
            name: [[s, ratio_text(x)] for s, x in points]
            for name, points in sorted(result.details.class_timeline.items())
        },
    }


def _status(result: AuditResult) -> str:
    if result.ok:
        return "COMPLIANT"
    reasons = []
    if not result.verdict.ok:
        reasons.append(
            f"{len(result.verdict.violations)} violation(s), "
            f"{len(result.verdict.evidence_failures)} evidence failure(s)"
        )
    if not result.integrity_ok:
        reasons.append("ledger integrity failure")
    return "NOT COMPLIANT (" + "; ".join(reasons) + ")"


def _class_label(result: AuditResult, name: str) -> str:
    for c in result.population.classes:
        if c.name == name:
            return f"{name} [{c.requirement.describe()}, {c.count} user(s)]"
    return name


def render_markdown(result: AuditResult, limit: int = 100) -> str:
    v = result.verdict
    lines = [
        "# wevent audit",
        "",
        f"**Verdict: {_status(result)}**",
        "",
        f"Engine `{result.engine}`; {v.per_user_charges} per-user charges; horizon {v.horizon}.",
        "",
        "## Ledger integrity",
        "",
    ]
    lines += [f"- {'ok' if i.ok else 'FAILED'}: {i.summary()}" for i in result.integrity]
    for i in result.integrity:
        lines += [f"  - {p.describe()}" for p in i.problems]
        lines += [f"  - {t.describe()}" for t in i.torn]
    lines += ["", "## Violations", ""]
    if not v.violations and not v.evidence_failures:
        lines.append("None.")
    else:
        lines += [
            "| # | kind | users | window | sum | bound | excess |",
            "|---|---|---|---|---|---|---|",
        ]
        for k, x in enumerate(v.violations[:limit], start=1):
            users = ", ".join(x.users[:3]) + (f" (+{len(x.users) - 3})" if len(x.users) > 3 else "")
            lines.append(
                f"| {k} | {x.kind} | {users} | [{x.first}, {x.last}] | {format_exact(x.total)} "
                f"| {format_exact(x.bound)} | {format_exact(x.excess)} |"
            )
        if len(v.violations) > limit:
            lines.append(f"\n... {len(v.violations) - limit} more (see the JSON report)")
        lines += [f"- evidence: {e.describe()}" for e in v.evidence_failures]
    lines += ["", "## Utilization per class (largest window sum / bound)", ""]
    lines += ["| class | utilization |", "|---|---|"]
    for name, share in sorted(v.class_utilization.items()):
        lines.append(f"| {_class_label(result, name)} | {_percent(share)} |")
    lines += ["", "## Users closest to their bounds", "", "| user | class | utilization |"]
    lines.append("|---|---|---|")
    for u, c, share in closest_users(result):
        lines.append(f"| {u} | {c} | {_percent(share)} |")
    lines += ["", "## Utilization histogram (users)", "", "| bin | users |", "|---|---|"]
    lines += [f"| {b} | {n} |" for b, n in histogram(result).items()]
    return "\n".join(lines) + "\n"


# ============================================================================ HTML


def _plot_value(x: Fraction) -> float:
    """Display only: the nearest double of an exact sum, for matplotlib's axes. It never enters
    a verdict, a violation or a utilization (those are exact, computed before any plot); round
    to nearest is enough since a plot cannot show the difference."""
    return float(x)


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg") :]


def _window_series(
    req: Requirement | None, spends: tuple[tuple[int, Fraction], ...], horizon: int
) -> tuple[list[int], list[float], list[float], str]:
    """Window sums over time (display floats) and the bound at each slot, for one user."""
    per = dict(spends)
    slots = list(range(1, horizon + 1)) if horizon <= 5000 else sorted(per)
    sums: list[float] = []
    bounds: list[float] = []
    label = "window sum"
    running = Fraction(0)
    for t in slots:
        if isinstance(req, Fixed):
            total = sum((x for s, x in spends if t - req.w < s <= t), Fraction(0))
            bound: Fraction = req.eps
            label = f"sum of the last {req.w} slots"
        elif isinstance(req, Dynamic):
            decl = req.in_force(t)
            if decl is None:
                total, bound = Fraction(0), Fraction(0)
            else:
                total = sum((x for s, x in spends if t - decl.w_back < s <= t), Fraction(0))
                bound = decl.eps_back
            label = "backward window sum"
        else:
            running += per.get(t, Fraction(0))
            total = running
            bound = req.eps if isinstance(req, WholeStream) else Fraction(0)
            label = "cumulative spend"
        sums.append(_plot_value(total))
        bounds.append(_plot_value(bound))
    return slots, sums, bounds, label


def _plots(result: AuditResult) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"
    plots: list[tuple[str, str]] = []
    hist = histogram(result)
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.bar(list(hist), list(hist.values()), color="#4477aa")
    ax.set_ylabel("users")
    ax.set_xlabel("utilization (largest window sum / bound)")
    ax.tick_params(axis="x", labelrotation=45)
    plots.append(("Utilization histogram", _svg(fig)))

    horizon = result.verdict.horizon
    for user, spends in result.details.user_spends.items():
        req = result.population.get(user)
        slots, sums, bounds, label = _window_series(req, spends, horizon)
        fig, ax = plt.subplots(figsize=(7, 2.6))
        ax.step(slots, sums, where="post", label=label, color="#228833")
        ax.step(slots, bounds, where="post", label="bound", color="#cc3311", linestyle="--")
        ax.set_xlabel("slot")
        ax.set_ylabel("epsilon")
        ax.legend(loc="upper right", fontsize=8)
        util = result.verdict.user_utilization.get(user)
        plots.append((f"Window sums of {user} ({_percent(util)})", _svg(fig)))

    if result.details.class_timeline:
        fig, ax = plt.subplots(figsize=(7, 3))
        for name, points in sorted(result.details.class_timeline.items()):
            ax.plot([s for s, _ in points], [_plot_value(x) for _, x in points], label=name, lw=1)
        ax.set_xlabel("slot")
        ax.set_ylabel("per-user charges (sum)")
        ax.legend(loc="upper right", fontsize=7, ncol=2)
        plots.append(("Spends over time per class", _svg(fig)))
    return plots


_CSS = """
body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}
h1{font-size:1.6em} .ok{color:#1b7837} .bad{color:#b2182b}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:3px 8px;
font-size:.9em;text-align:left} figure{margin:1em 0} figcaption{font-weight:bold}
code{font-size:.85em}
"""


def render_html(result: AuditResult, limit: int = 200) -> str:
    """One self-contained HTML page: verdict, integrity, violations, utilization and plots."""
    e = html.escape
    v = result.verdict
    cls = "ok" if result.ok else "bad"
    out = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>wevent audit</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>wevent audit</h1>",
        f"<p id='verdict' class='{cls}'><strong>Verdict: {e(_status(result))}</strong></p>",
        f"<p>Engine <code>{e(result.engine)}</code>; inputs: "
        + ", ".join(f"<code>{e(p)}</code>" for p in result.inputs)
        + f"; {v.per_user_charges} per-user charges; horizon {v.horizon} slots.</p>",
        "<h2>Ledger integrity</h2><ul id='integrity'>",
    ]
    for i in result.integrity:
        out.append(f"<li>{'ok' if i.ok else '<b>FAILED</b>'}: {e(i.summary())}<ul>")
        out += [f"<li>{e(p.describe())}</li>" for p in i.problems]
        out += [f"<li>{e(t.describe())}</li>" for t in i.torn]
        out.append("</ul></li>")
    out.append("</ul><h2>Violations</h2>")
    if not v.violations and not v.evidence_failures:
        out.append("<p>None: every window and evidence record holds.</p>")
    else:
        out.append(
            "<table id='violations'><tr><th>#</th><th>kind</th><th>users</th><th>window</th>"
            "<th>spends</th><th>sum</th><th>bound</th><th>excess</th></tr>"
        )
        for k, x in enumerate(v.violations[:limit], start=1):
            users = ", ".join(x.users[:3]) + (f" (+{len(x.users) - 3})" if len(x.users) > 3 else "")
            spends = ", ".join(f"{s}:{format_exact(a)}" for s, a in x.spends[:10])
            out.append(
                f"<tr><td>{k}</td><td>{e(x.kind)}</td><td>{e(users)}</td>"
                f"<td>[{x.first}, {x.last}]</td><td>{e(spends)}</td>"
                f"<td>{e(format_exact(x.total))}</td><td>{e(format_exact(x.bound))}</td>"
                f"<td>{e(format_exact(x.excess))}</td></tr>"
            )
        out.append("</table>")
        if len(v.violations) > limit:
            out.append(f"<p>... {len(v.violations) - limit} more (see the JSON report).</p>")
        out += [f"<p>Evidence: {e(x.describe())}</p>" for x in v.evidence_failures]
    out.append("<h2>Utilization per class</h2><table><tr><th>class</th><th>utilization</th></tr>")
    for name, share in sorted(v.class_utilization.items()):
        label = e(_class_label(result, name))
        out.append(f"<tr><td>{label}</td><td>{e(_percent(share))}</td></tr>")
    out.append("</table><h2>Users closest to their bounds</h2>")
    out.append("<table><tr><th>user</th><th>class</th><th>utilization</th></tr>")
    for u, c, share in closest_users(result):
        out.append(f"<tr><td>{e(u)}</td><td>{e(c)}</td><td>{e(_percent(share))}</td></tr>")
    out.append("</table><h2>Plots</h2>")
    for title, svg in _plots(result):
        out.append(f"<figure class='plot'><figcaption>{e(title)}</figcaption>{svg}</figure>")
    out.append("</body></html>")
    return "\n".join(out)
