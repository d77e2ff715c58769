"""Audit reports that stand as evidence: the text the command line prints, JSON (exact,
machine-readable, with a schema version; its schema is in docs/audits.md), Markdown, and one
self-contained HTML page with inline SVG plots (matplotlib).

Every report names what was checked: the wevent version, the UTC time, the command line, every
input file (ledgers and requirement files) with its SHA-256, each ledger's integrity state
(intact, broken, unprotected) with its full chain head and what anchored it, and the engine.
Numbers in JSON are exact (``"a/b"`` strings); percentages come from one formatter
(`wevent.verifier.verdict.percent_text`: exact, or marked ``~``); plots are drawn from floats of
the exact values, never used for any decision.
"""

from __future__ import annotations

import html
import io
import itertools
import json
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from wevent.accounting.budget import format_exact, ratio_text
from wevent.accounting.evidence import evidence_to_json
from wevent.accounting.requirements import Dynamic, Fixed, Requirement, WholeStream
from wevent.verifier.audit import AuditResult
from wevent.verifier.sql import tightest_users
from wevent.verifier.verdict import Violation, percent_text, render_verdict
from wevent.verifier.verdict import breaks as violation_breaks

__all__ = [
    "SCHEMA_VERSION",
    "Closest",
    "breaks",
    "closest_groups",
    "closest_users",
    "figures",
    "histogram",
    "render_html",
    "render_markdown",
    "render_text",
    "report_json",
    "status_line",
]

# The JSON report's schema version (docs/audits.md): raised when a field changes meaning or
# goes away; added fields keep it. 2: the top-level "ok" is false for an unprotected ledger
# (it was the window verdict alone, now "compliant").
SCHEMA_VERSION = 2

_BINS = (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100)

STATE_LABEL = {"intact": "INTACT", "broken": "BROKEN", "unprotected": "UNPROTECTED (warning)"}


def _util_text(x: Fraction | None) -> str:
    return "inf" if x is None else ratio_text(x)


def status_line(result: AuditResult) -> str:
    """The audit's one-line outcome (the command line's last line, the reports' headline)."""
    status = result.status
    if status == "integrity-failure":
        extra = (
            f"; and NOT COMPLIANT: {len(result.verdict.violations)} violation(s), "
            f"{result.verdict.evidence_text()}, in the verified content"
            if not result.verdict.ok
            else "; the verified content alone is compliant"
        )
        return f"INTEGRITY FAILURE (a ledger does not verify{extra})"
    if status == "not-compliant":
        return (
            f"NOT COMPLIANT ({len(result.verdict.violations)} violation(s), "
            f"{result.verdict.evidence_text()})"
        )
    if status == "uncommitted-tail":
        return (
            "UNCOMMITTED TAIL (the committed content is compliant; a crashed writer's tail was "
            "not audited: wevent ledger repair moves it aside)"
        )
    if result.unprotected:
        return "COMPLIANT (unprotected: a plain ledger cannot show tampering)"
    return "COMPLIANT"


def _evidence_summary(result: AuditResult) -> str:
    """The reports' evidence section in words: how many charges carry evidence, how many of
    those fail, and that the others' costs are not certified (never "None." alone, which would
    read as "every cost certified" when no charge carries evidence)."""
    v = result.verdict
    if v.evidence_charges == 0:
        return (
            f"No charge carries evidence: no cost was certified ({v.charges} charge(s) audited "
            "as charged)."
        )
    failing = sum(f.rows for f in v.evidence_failures)
    text = f"{v.evidence_charges} of {v.charges} charge(s) carry evidence; " + (
        "every one certifies its charge."
        if not v.evidence_failures
        else f"{failing} of them do not certify their charge "
        f"({len(v.evidence_failures)} failure(s) below)."
    )
    if v.uncertified_charges:
        text += f" {v.uncertified_charges} charge(s) carry none: their costs are not certified."
    return text


def breaks(result: AuditResult, violation: Violation) -> str:
    """The requirement, or for a dynamic user the declaration, that ``violation`` breaks."""
    return violation_breaks(violation, result.population)


@dataclass(frozen=True, slots=True)
class Closest:
    """Users of one class tied at one utilization: ``count`` of them, the first few named."""

    utilization: Fraction | None
    cls: str
    count: int
    users: tuple[str, ...]

    def text(self) -> str:
        share = percent_text(self.utilization)
        if self.count == 1:
            return f"{self.users[0]} ({share})"
        named = ", ".join(self.users) + (", ..." if self.count > len(self.users) else "")
        return f"{self.count} users of {self.cls} ({named}) at {share}"

    def who(self) -> str:
        if self.count == 1:
            return self.users[0]
        more = f", ... ({self.count} users)" if self.count > len(self.users) else ""
        return ", ".join(self.users) + more

    def to_json(self) -> dict[str, Any]:
        return {
            "utilization": _util_text(self.utilization),
            "class": self.cls,
            "users": self.count,
            "examples": list(self.users),
        }


def closest_groups(result: AuditResult, k: int = 20, sample: int = 3) -> list[Closest]:
    """The k largest utilizations (unbounded first), users of one class tied at one value
    collapsed into one entry with their count (exact comparisons)."""
    pop = result.population
    by_value: dict[Fraction | None, list[str]] = {}
    for user, x in result.verdict.user_utilization.items():
        by_value.setdefault(x, []).append(user)
    order = sorted(by_value, key=lambda x: (x is not None, -(x or 0)))
    out: list[Closest] = []
    for x in order:
        per_class: dict[str, list[str]] = {}
        for u in by_value[x]:
            per_class.setdefault(pop.class_of(u).name if u in pop else "unregistered", []).append(u)
        for cls in sorted(per_class):
            users = sorted(per_class[cls])
            out.append(Closest(x, cls, len(users), tuple(users[:sample])))
            if len(out) == k:
                return out
    return out


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


def _integrity_lines(result: AuditResult) -> list[tuple[str, list[str]]]:
    """Per ledger: its headline and the indented details (problems, tail, notes)."""
    out = []
    for i in result.integrity:
        details = [p.describe() for p in i.problems]
        details += [t.describe() for t in i.torn]
        details += [f"note: {n}" for n in i.notes]
        out.append((f"{STATE_LABEL[i.state]}: {i.summary(tail=False)}", details))
    return out


def render_text(result: AuditResult, *, closest: int = 5) -> str:
    """What `wevent audit` prints before its status line: each ledger's integrity (with the full
    head, to pass back with --expect-head), the verdict, and the users closest to their bounds."""
    lines = []
    for head, details in _integrity_lines(result):
        lines.append(f"integrity: {head}")
        lines += [f"  {d}" for d in details]
    lines.append(render_verdict(result.verdict, result.population))
    groups = closest_groups(result, closest)
    if groups:
        lines.append("closest to their bounds: " + "; ".join(g.text() for g in groups))
    return "\n".join(lines)


def _provenance(result: AuditResult) -> dict[str, Any]:
    return {
        "tool": {"name": "wevent", "version": result.version},
        "created": result.created,
        "command": list(result.command),
        "engine": result.engine,
    }


def report_json(result: AuditResult) -> dict[str, Any]:
    """The audit as JSON (schema version `SCHEMA_VERSION`, docs/audits.md)."""
    v = result.verdict
    return {
        "schema_version": SCHEMA_VERSION,
        **_provenance(result),
        "status": result.status,
        "ok": result.ok,
        "compliant": v.ok,
        "ledgers": list(result.inputs),
        "requirements": list(result.requirements),
        "inputs": [f.to_json() for f in result.files],
        "anchors": {
            "expected_heads": list(result.expected_heads),
            "public_key": result.public_key or None,
        },
        "integrity": [i.to_json() for i in result.integrity],
        "verdict": {
            "ok": v.ok,
            "violations": [{**x.to_json(), "breaks": breaks(result, x)} for x in v.violations],
            "evidence_failures": [e.to_json() for e in v.evidence_failures],
            "horizon": v.horizon,
            "per_user_charges": v.per_user_charges,
            **v.evidence_counts(),
        },
        "utilization": {
            "classes": {k: _util_text(x) for k, x in sorted(v.class_utilization.items())},
            "closest": [g.to_json() for g in closest_groups(result)],
            "histogram": histogram(result),
            "users": len(v.user_utilization),
        },
        "spends_over_time": {
            name: [[s, ratio_text(x)] for s, x in points]
            for name, points in sorted(result.details.class_timeline.items())
        },
    }


def _class_label(result: AuditResult, name: str) -> str:
    for c in result.population.classes:
        if c.name == name:
            return f"{name} [{c.requirement.describe()}, {c.count} user(s)]"
    return name


def _users(x: Violation) -> str:
    return ", ".join(x.users[:3]) + (f" (+{len(x.users) - 3})" if len(x.users) > 3 else "")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(result: AuditResult, limit: int = 100) -> str:
    v = result.verdict
    lines = [
        "# wevent audit",
        "",
        f"**Verdict: {status_line(result)}**",
        "",
        "## What was audited",
        "",
        "| | |",
        "|---|---|",
        f"| wevent | {result.version} |",
        f"| created (UTC) | {result.created} |",
        f"| command | `{_md(' '.join(result.command)) or '(Python API)'}` |",
        f"| engine | `{result.engine}` |",
        f"| expected heads | {', '.join(f'`{h}`' for h in result.expected_heads) or 'none'} |",
        f"| public key | {f'`{result.public_key}`' if result.public_key else 'none'} |",
        f"| charges | {v.per_user_charges} per-user charges, horizon {v.horizon} slots |",
        "",
        "## Inputs (SHA-256)",
        "",
        "| role | file | bytes | SHA-256 |",
        "|---|---|---|---|",
    ]
    lines += [f"| {f.role} | `{_md(f.path)}` | {f.bytes} | `{f.sha256}` |" for f in result.files]
    lines += ["", "## Ledger integrity", ""]
    for head, details in _integrity_lines(result):
        lines.append(f"- {_md(head)}")
        lines += [f"  - {_md(d)}" for d in details]
    lines += ["", "## Violations", ""]
    if not v.violations:
        lines.append("None.")
    else:
        lines += [
            "| # | kind | breaks | users | window | sum | bound | excess |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for k, x in enumerate(v.violations[:limit], start=1):
            lines.append(
                f"| {k} | {x.kind} | {_md(breaks(result, x))} | {_md(_users(x))} "
                f"| [{x.first}, {x.last}] | {format_exact(x.total)} "
                f"| {format_exact(x.bound)} | {format_exact(x.excess)} |"
            )
        if len(v.violations) > limit:
            lines.append(f"\n... {len(v.violations) - limit} more (see the JSON report)")
    lines += ["", "## Evidence failures", "", _evidence_summary(result)]
    if v.evidence_failures:
        lines.append("")
        lines += [
            "| # | evidence | amount | certified cost in | charges | first row | first slot |",
            "|---|---|---|---|---|---|---|",
        ]
        for k, e in enumerate(v.evidence_failures[:limit], start=1):
            lines.append(
                f"| {k} | `{_md(json.dumps(evidence_to_json(e.evidence)))}` | {format_exact(e.amount)} "
                f"| [{ratio_text(e.cost_lower)}, {ratio_text(e.cost_upper)}] | {e.rows} "
                f"| {e.first_row + 1} | {e.first_slot} |"
            )
    lines += ["", "## Utilization per class (largest window sum / bound)", ""]
    lines += ["| class | utilization |", "|---|---|"]
    for name, share in sorted(v.class_utilization.items()):
        lines.append(f"| {_md(_class_label(result, name))} | {percent_text(share)} |")
    lines += ["", "## Users closest to their bounds", "", "| users | class | utilization |"]
    lines.append("|---|---|---|")
    for g in closest_groups(result):
        lines.append(f"| {_md(g.who())} | {_md(g.cls)} | {percent_text(g.utilization)} |")
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


@dataclass
class _Series:
    label: str
    values: list[float]
    bound: bool  # a bound (dashed) or a sum (solid)


def _window_series(
    req: Requirement | None, spends: tuple[tuple[int, Fraction], ...], horizon: int
) -> tuple[list[int], list[_Series]]:
    """Window sums over time and the bound in force at each slot, for one user (display
    floats): for a fixed requirement the sum of the last w slots; for a dynamic one the backward
    window ending at t and the forward window starting at t, each against the bound of the
    declaration in force at t; for a whole-stream one the cumulative spend."""
    per = dict(spends)
    slots = list(range(1, horizon + 1)) if horizon <= 5000 else sorted(per)

    def window(first: int, last: int) -> Fraction:
        return sum((x for s, x in spends if first <= s <= last), Fraction(0))

    if isinstance(req, Fixed):
        sums = [window(t - req.w + 1, t) for t in slots]
        return slots, [
            _Series(f"sum of the last {req.w} slots", [_plot_value(x) for x in sums], False),
            _Series("bound", [_plot_value(req.eps)] * len(slots), True),
        ]
    if isinstance(req, Dynamic):
        back, back_bound, fwd, fwd_bound = [], [], [], []
        for t in slots:
            decl = req.in_force(t)
            if decl is None:
                total_b = total_f = bound_b = bound_f = Fraction(0)
            else:
                total_b = window(t - decl.w_back + 1, t)
                total_f = window(t, t + decl.w_fwd - 1)
                bound_b, bound_f = decl.eps_back, decl.eps_fwd
            back.append(_plot_value(total_b))
            back_bound.append(_plot_value(bound_b))
            fwd.append(_plot_value(total_f))
            fwd_bound.append(_plot_value(bound_f))
        return slots, [
            _Series("backward window sum (ending at t)", back, False),
            _Series("backward bound", back_bound, True),
            _Series("forward window sum (from t)", fwd, False),
            _Series("forward bound", fwd_bound, True),
        ]
    running = Fraction(0)
    cumulative = []
    for t in slots:
        running += per.get(t, Fraction(0))
        cumulative.append(_plot_value(running))
    bound = req.eps if isinstance(req, WholeStream) else Fraction(0)
    return slots, [
        _Series("cumulative spend", cumulative, False),
        _Series("bound", [_plot_value(bound)] * len(slots), True),
    ]


_COLORS = ("#228833", "#cc3311", "#4477aa", "#ee7733")


def _outside_legend(ax: Any, size: int = 8) -> None:
    """The legend to the right of the axes, never over the data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=size)


def _plots(result: AuditResult) -> list[tuple[str, str]]:
    """The report's plots as inline SVG, with their titles."""
    return [(title, _svg(fig)) for title, fig in figures(result)]


def figures(result: AuditResult) -> list[tuple[str, Any]]:
    """The report's plots as matplotlib figures, with their titles: the utilization histogram,
    the window sums of the tightest user of each class against their bounds (backward and
    forward windows for a dynamic user), and the spends per slot of each class. Every y axis
    starts at zero, sums are drawn as steps (a spend holds for its slot) and legends sit to the
    right of the axes, off the data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"
    plots: list[tuple[str, Any]] = []
    hist = histogram(result)
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.bar(list(hist), list(hist.values()), color="#4477aa")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("users")
    ax.set_xlabel("utilization (largest window sum / bound)")
    ax.tick_params(axis="x", labelrotation=45)
    plots.append(("Utilization histogram", fig))

    horizon = result.verdict.horizon
    for user, spends in result.details.user_spends.items():
        req = result.population.get(user)
        slots, series = _window_series(req, spends, horizon)
        fig, ax = plt.subplots(figsize=(7, 2.6))
        for k, line in enumerate(series):
            ax.step(
                slots,
                line.values,
                where="post",
                label=line.label,
                color=_COLORS[(k // 2) * 2 + (1 if line.bound else 0)],
                linestyle="--" if line.bound else "-",
                alpha=0.9 if k < 2 else 0.6,
            )
        ax.set_ylim(bottom=0)
        ax.set_xlabel("slot")
        ax.set_ylabel("epsilon")
        _outside_legend(ax)
        util = result.verdict.user_utilization.get(user)
        plots.append((f"Window sums of {user} ({percent_text(util)})", fig))

    if result.details.class_timeline:
        fig, ax = plt.subplots(figsize=(7, 3))
        for name, points in sorted(result.details.class_timeline.items()):
            ax.step(
                [s for s, _ in points],
                [_plot_value(x) for _, x in points],
                where="post",
                label=name,
                lw=1,
            )
        ax.set_ylim(bottom=0)
        ax.set_xlabel("slot")
        ax.set_ylabel("per-user charges in the slot (sum)")
        _outside_legend(ax, 7)
        plots.append(("Spends per slot, per class", fig))
    return plots


_CSS = """
body{font-family:sans-serif;max-width:1080px;margin:2em auto;color:#222}
h1{font-size:1.6em} .ok{color:#1b7837} .bad{color:#b2182b} .warn{color:#8c510a}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:3px 8px;
font-size:.9em;text-align:left;vertical-align:top} figure{margin:1em 0}
figcaption{font-weight:bold} code{font-size:.85em;word-break:break-all}
"""


def _table(headers: list[str], rows: list[list[str]], ident: str = "") -> str:
    """An HTML table of already escaped cells."""
    attr = f" id='{ident}'" if ident else ""
    out = [f"<table{attr}><tr>" + "".join(f"<th>{h}</th>" for h in headers) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows]
    out.append("</table>")
    return "".join(out)


def render_html(result: AuditResult, limit: int = 200) -> str:
    """One self-contained HTML page: verdict, provenance and inputs, integrity, violations,
    evidence failures, utilization and plots."""
    e = html.escape
    v = result.verdict
    status = result.status
    cls = "ok" if result.ok else "warn" if status == "compliant" else "bad"
    code = "<code>{}</code>".format
    out = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>wevent audit</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>wevent audit</h1>",
        f"<p id='verdict' class='{cls}'><strong>Verdict: {e(status_line(result))}</strong></p>",
        "<h2>What was audited</h2>",
        _table(
            ["", ""],
            [
                ["wevent", e(result.version)],
                ["created (UTC)", e(result.created)],
                [
                    "command",
                    code(e(" ".join(result.command))) if result.command else "(Python API)",
                ],
                ["engine", code(e(result.engine))],
                [
                    "expected heads",
                    ", ".join(code(e(h)) for h in result.expected_heads) or "none",
                ],
                ["public key", code(e(result.public_key)) if result.public_key else "none"],
                ["charges", f"{v.per_user_charges} per-user charges; horizon {v.horizon} slots"],
            ],
            "provenance",
        ),
        "<h2>Inputs (SHA-256)</h2>",
        _table(
            ["role", "file", "bytes", "SHA-256"],
            [[e(f.role), code(e(f.path)), str(f.bytes), code(f.sha256)] for f in result.files],
            "inputs",
        ),
        "<h2>Ledger integrity</h2><ul id='integrity'>",
    ]
    for i, (head, details) in zip(result.integrity, _integrity_lines(result), strict=True):
        mark = {"intact": "ok", "broken": "bad", "unprotected": "warn"}[i.state]
        out.append(f"<li class='{mark}'>{e(head)}<ul>")
        out += [f"<li>{e(d)}</li>" for d in details]
        out.append("</ul></li>")
    out.append("</ul><h2>Violations</h2>")
    if not v.violations:
        out.append("<p>None: every window holds.</p>")
    else:
        rows = [
            [
                str(k),
                e(x.kind),
                e(breaks(result, x)),
                e(_users(x)),
                f"[{x.first}, {x.last}]",
                e(", ".join(f"{s}:{format_exact(a)}" for s, a in x.spends[:10])),
                e(format_exact(x.total)),
                e(format_exact(x.bound)),
                e(format_exact(x.excess)),
            ]
            for k, x in enumerate(v.violations[:limit], start=1)
        ]
        out.append(
            _table(
                ["#", "kind", "breaks", "users", "window", "spends", "sum", "bound", "excess"],
                rows,
                "violations",
            )
        )
        if len(v.violations) > limit:
            out.append(f"<p>... {len(v.violations) - limit} more (see the JSON report).</p>")
    out.append("<h2>Evidence failures</h2>")
    out.append(f"<p id='evidence-summary'>{e(_evidence_summary(result))}</p>")
    if v.evidence_failures:
        rows = [
            [
                str(k),
                code(e(json.dumps(evidence_to_json(x.evidence)))),
                e(format_exact(x.amount)),
                e(f"[{ratio_text(x.cost_lower)}, {ratio_text(x.cost_upper)}]"),
                str(x.rows),
                str(x.first_row + 1),
                str(x.first_slot),
            ]
            for k, x in enumerate(v.evidence_failures[:limit], start=1)
        ]
        out.append(
            _table(
                [
                    "#",
                    "evidence",
                    "amount",
                    "certified cost in",
                    "charges",
                    "first row",
                    "first slot",
                ],
                rows,
                "evidence",
            )
        )
    out.append("<h2>Utilization per class</h2>")
    out.append(
        _table(
            ["class", "utilization"],
            [
                [e(_class_label(result, name)), e(percent_text(share))]
                for name, share in sorted(v.class_utilization.items())
            ],
        )
    )
    out.append("<h2>Users closest to their bounds</h2>")
    out.append(
        _table(
            ["users", "class", "utilization"],
            [
                [e(g.who()), e(g.cls), e(percent_text(g.utilization))]
                for g in closest_groups(result)
            ],
            "closest",
        )
    )
    out.append("<h2>Plots</h2>")
    for title, svg in _plots(result):
        out.append(f"<figure class='plot'><figcaption>{e(title)}</figcaption>{svg}</figure>")
    out.append("</body></html>")
    return "\n".join(out)
