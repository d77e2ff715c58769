"""The ``wevent`` command line.

Exit codes: 0 success / compliant, 1 a violation was found, 2 a usage or input error (always one
line on stderr, never a traceback), 3 undecided (a proof timed out; `gate --require-proof`
without a proof), 4 verifier error (the verifier contradicted itself: a proof's counterexample
does not replay; a bug in wevent, never a verdict).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from wevent._extras import missing_extra, require
from wevent.accounting.budget import MAX_SLOT, BudgetError, format_exact
from wevent.accounting.formats import read_ledger, read_requirements
from wevent.errors import InputError
from wevent.mechanisms.allocators import CENTRAL, LOCAL_BUDGET, MECHANISMS, POPULATION
from wevent.verifier.check import check
from wevent.verifier.verdict import percent_text, render_verdict

__all__ = ["main"]

EXIT_OK, EXIT_VIOLATION, EXIT_INPUT = 0, 1, 2


def _fail(message: str) -> None:
    click.echo(f"wevent: error: {message}", err=True)
    sys.exit(EXIT_INPUT)


def _stage_printer(enabled: bool) -> Callable[[str], None] | None:
    """A progress line for each stage of a long check (stderr, only when it is a terminal)."""
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bar = tqdm(total=5, desc="checking", unit="stage", leave=False, file=sys.stderr)

    def say(stage: str) -> None:
        bar.set_postfix_str(stage)
        bar.update(1)

    return say


def _reading_bar(path: Path) -> Callable[[int, int], None] | None:
    """A progress bar for reading a large text ledger (stderr, only when it is a terminal)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bar = tqdm(desc=f"reading {path.name}", unit="line", leave=False, file=sys.stderr)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    return update


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="wevent", prog_name="wevent")
def cli() -> None:
    """wevent: exact privacy accounting for w-event differential privacy on infinite streams.

    Every spend of a stream mechanism is a charge in a ledger (slot, user or group, exact
    epsilon, evidence). wevent checks ledgers against each user's requirement: a fixed window
    (w, eps), dynamic backward/forward windows declared per slot, or a whole-stream budget.
    All arithmetic is exact: 0.1 + 0.1 + 0.1 == 0.3, and an excess of 1e-18 is an excess.

    \b
    Start with:  wevent demo
    Then:        wevent check LEDGER --requirements REQ.csv
    File formats are documented in docs/formats.md.
    """


@cli.command("check")
@click.argument("ledger", type=click.Path(path_type=Path))
@click.option(
    "--requirements",
    "-r",
    "requirements",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Requirements CSV: 'user,w,epsilon' (w=inf for whole-stream) or "
    "'user,slot,w_back,eps_back,w_fwd,eps_fwd' (dynamic). Repeat to combine files.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON (exact 'a/b').")
@click.option(
    "--horizon",
    type=click.IntRange(min=1, max=MAX_SLOT),
    default=None,
    help="Check windows up to this slot (default: the ledger's last slot).",
)
def check_cmd(
    ledger: Path, requirements: Sequence[Path], as_json: bool, horizon: int | None
) -> None:
    """Check LEDGER (.jsonl, .csv or .parquet) against the requirements.

    Every evidence record must certify a cost no larger than its charge, and every window of
    every user must stay within its bound. Exit 0 when all hold, 1 on any violation, 2 on bad
    input. Violations are printed exactly: the user, the window, the per-slot spends, the sum,
    the bound and the excess.

    \b
    Example:
      wevent check ledger.jsonl -r requirements.csv
      wevent check ledger.parquet -r fixed.csv -r dynamic.csv --json
    """
    try:
        population = read_requirements(requirements)
        book = read_ledger(ledger, progress=_reading_bar(ledger))
    except BudgetError as exc:
        _fail(str(exc))
    verdict = check(book, population, horizon=horizon, progress=_stage_printer(not as_json))
    if as_json:
        click.echo(json.dumps(verdict.to_json(), indent=2))
    else:
        click.echo(f"{ledger}: {len(book)} charges, {len(population)} users with requirements")
        click.echo(render_verdict(verdict, population))
    sys.exit(EXIT_OK if verdict.ok else EXIT_VIOLATION)


@cli.command("audit")
@click.argument("ledgers", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--requirements",
    "-r",
    "requirements",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Requirements CSV (as for check). Repeat to combine files.",
)
@click.option(
    "--engine",
    type=click.Choice(["numpy", "duckdb", "spark"]),
    default="numpy",
    show_default=True,
    help="numpy: in memory; duckdb: SQL over Parquet, out of core; spark: the same SQL on Spark.",
)
@click.option("--html", "html_out", type=click.Path(path_type=Path), help="Write an HTML report.")
@click.option("--json", "json_out", type=click.Path(path_type=Path), help="Write a JSON report.")
@click.option(
    "--markdown", "md_out", type=click.Path(path_type=Path), help="Write a Markdown report."
)
@click.option(
    "--horizon",
    type=click.IntRange(min=1, max=MAX_SLOT),
    default=None,
    help="Check windows up to this slot (default: the ledger's last slot).",
)
@click.option(
    "--expect-head",
    default=None,
    help="The chain head (hex) recorded elsewhere: anchors a single durable ledger.",
)
@click.option(
    "--memory-limit",
    default="4GB",
    show_default=True,
    help="DuckDB memory cap (it spills to a temporary directory beyond).",
)
def audit_cmd(
    ledgers: Sequence[Path],
    requirements: Sequence[Path],
    engine: str,
    html_out: Path | None,
    json_out: Path | None,
    md_out: Path | None,
    horizon: int | None,
    expect_head: str | None,
    memory_limit: str,
) -> None:
    """Audit deployed LEDGERS (files read in order as one ledger) against the requirements.

    A durable ledger (chained .jsonl, or a .wledger segment directory) is first verified:
    edited, deleted or reordered committed records and torn tails are reported. Then the
    chosen engine checks every window and evidence record exactly. Exit 0 when compliant and
    intact, 1 on any violation or integrity failure, 2 on bad input.

    \b
    Example:
      wevent audit run.jsonl -r requirements.csv --html report.html
      wevent audit big.parquet -r req.csv --engine duckdb --json audit.json
    """
    from wevent.verifier.audit import run_audit
    from wevent.verifier.report import closest_users, render_html, render_markdown, report_json
    from wevent.verifier.sql import EngineError

    bar = None
    say = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=12, desc=f"auditing ({engine})", unit="stage", leave=False)

        def say(stage: str) -> None:
            assert bar is not None
            bar.set_postfix_str(stage)
            bar.update(1)

    try:
        population = read_requirements(requirements)
        result = run_audit(
            ledgers,
            population,
            engine=engine,
            horizon=horizon,
            expect_head=expect_head,
            memory_limit=memory_limit,
            progress=say,
        )
    except (BudgetError, EngineError) as exc:
        _fail(str(exc))
    except MemoryError as exc:  # the numpy engine holds the ledger in memory
        hint = " (--engine duckdb audits out of core)" if engine == "numpy" else ""
        _fail(f"{engine} engine ran out of memory: {exc or 'MemoryError'}{hint}")
    except Exception as exc:  # engine failures (e.g. a Spark or DuckDB error): one line
        missing = missing_extra(exc, "audit")
        if missing is not None and engine == "spark":  # [spark] brings pyarrow too
            missing = require("audit --engine spark", "spark")
        if missing is not None:
            _fail(missing)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _fail(f"{engine} engine failed: {first}")
    finally:
        if bar is not None:
            bar.close()
    for found in result.integrity:
        click.echo(f"integrity: {'ok' if found.ok else 'FAILED'}: {found.summary()}")
        for p in found.problems:
            click.echo(f"  {p.describe()}")
        for t in found.torn:
            click.echo(f"  {t.describe()}")
    click.echo(render_verdict(result.verdict, population))
    close = closest_users(result, 5)
    if close:
        click.echo(
            "closest to their bounds: " + ", ".join(f"{u} ({percent_text(x)})" for u, _, x in close)
        )
    renderers: list[tuple[Path | None, Callable[[], str]]] = [
        (json_out, lambda: json.dumps(report_json(result), indent=2)),
        (md_out, lambda: render_markdown(result)),
        (html_out, lambda: render_html(result)),
    ]
    for out, render in renderers:
        if out is not None:
            try:
                out.write_text(render(), encoding="utf-8")
            except OSError as exc:
                _fail(f"{out}: cannot write ({exc.strerror})")
            click.echo(f"report written to {out}")
    click.echo(f"audit: {'COMPLIANT' if result.ok else 'NOT COMPLIANT'}")
    sys.exit(EXIT_OK if result.ok else EXIT_VIOLATION)


EXIT_UNKNOWN = 3
EXIT_VERIFIER = 4  # the verifier contradicted itself (wevent.proofs.counterexamples.ProverError)


_PRIMITIVES = ("grr", "oue", "pue", "sm")
_ALLOCATORS = (*CENTRAL, *LOCAL_BUDGET)
_POPULATION_PROOFS = (*POPULATION, "ops")


def _exsub_prove_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--eps",
        default=None,
        help="exsub: prove at this epsilon (exact, e.g. 1 or 1/2) with the runtime's rounded "
        "e^-eps instead of for every eps > 0.",
    )(f)
    f = click.option(
        "--m",
        "m",
        type=click.IntRange(min=1, max=12),
        default=3,
        show_default=True,
        help="exsub: output size m (at most d').",
    )(f)
    f = click.option(
        "--s",
        "sparsity",
        type=click.IntRange(min=1, max=11),
        default=2,
        show_default=True,
        help="exsub: sparsity s (non-zero entries of the input, s < d').",
    )(f)
    return click.option(
        "--dprime",
        type=click.IntRange(min=2, max=12),
        default=5,
        show_default=True,
        help="exsub: vector length d' (inputs enumerated: C(d', s) 2^s; d' <= 6 takes seconds).",
    )(f)


def _prove_exsub(
    dprime: int, sparsity: int, m: int, eps_text: str | None, variant: str, as_json: bool
) -> None:
    """`wevent prove exsub`: exits 0 proved, 1 counterexample, 2 bad input, 3 unknown."""
    from wevent.accounting.budget import parse_exact
    from wevent.proofs.exsub import prove_exsub

    if variant == "published":
        _fail("exsub: use --variant printed-offline or printed-online for 004's pseudo-code")
    try:
        eps = None if eps_text is None else parse_exact(eps_text, what="--eps")
        if eps is not None and eps <= 0:
            raise BudgetError(f"--eps must be positive, got {eps_text}")
        if not sparsity < dprime or m > dprime:
            raise BudgetError(
                f"exsub needs s < d' and m <= d' (got d'={dprime}, s={sparsity}, m={m})"
            )
        proof = prove_exsub(dprime, sparsity, m, eps, variant)
    except BudgetError as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps(proof.to_json(), indent=2))
    else:
        label = {"proved": "PROVED", "counterexample": "REFUTED", "unknown": "UNKNOWN"}
        click.echo(
            f"exsub ({variant}): {label[proof.status]} ({proof.inputs} inputs, "
            f"{proof.outputs} outputs, {proof.seconds:.2f} s)"
        )
        click.echo(f"  theorem: {proof.statement}")
        for c in proof.checks:
            click.echo(f"  - {c}")
        if proof.counterexample:
            click.echo(f"  counterexample: {proof.counterexample}")
    codes = {"proved": EXIT_OK, "counterexample": EXIT_VIOLATION}
    sys.exit(codes.get(proof.status, EXIT_UNKNOWN))


@cli.command("prove")
@click.argument(
    "target", type=click.Choice([*_PRIMITIVES, *_ALLOCATORS, *_POPULATION_PROOFS, "exsub", "all"])
)
@click.option(
    "--d",
    "d",
    type=click.IntRange(min=2, max=64),
    default=5,
    show_default=True,
    help="Primitives: domain size for the fixed-d and exhaustive checks (OUE enumerates 2^d "
    "outputs for d <= 8).",
)
@click.option(
    "--variant",
    type=click.Choice(["sound", "published", "printed-offline", "printed-online"]),
    default="sound",
    show_default=True,
    help="Allocators: 'published' is the papers' pseudo-code as printed. exsub: "
    "'printed-offline' / 'printed-online' run 004 Algorithm 3 line 13 / Algorithm 4 as printed.",
)
@click.option(
    "--arithmetic",
    type=click.Choice(["exact", "float"]),
    default="exact",
    show_default=True,
    help="Allocators: absorption counts exact, or in doubles as published code computes them "
    "(then budgets range over the decimals 0.1, 0.2, ..., 1 and every decision sequence is "
    "explored).",
)
@click.option(
    "--w-max",
    type=click.IntRange(min=1, max=12),
    default=None,
    help="Allocators: every window size 1..W (default 6 fixed; dynamic 2, or 4 with --unbounded: "
    "each class then has declarations at the --declarations slots with every w_B, w_F <= W).",
)
@click.option(
    "--classes",
    type=click.IntRange(min=1, max=4),
    default=None,
    help="Allocators: populations of 1..K requirement classes (default 2; dynamic bounded 1).",
)
@click.option(
    "--horizon",
    type=click.IntRange(min=1, max=60),
    default=None,
    help="Allocators: slots unrolled (default 3 * w_max).",
)
@click.option(
    "--unbounded",
    is_flag=True,
    help="Allocators: prove for every horizon by induction (exact arithmetic; dynamic kernels: "
    "default w <= 4, 2 classes).",
)
@click.option(
    "--declarations",
    default=None,
    metavar="SLOTS",
    help="Dynamic kernels: the slots at which each class declares a requirement, e.g. 1 or "
    "1,3 (default 1,2).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=0, max=64),
    default=0,
    show_default=True,
    help="Allocators: processes sharing the dynamic induction's window shapes (0: one per core).",
)
@click.option(
    "--timeout",
    type=click.IntRange(min=1),
    default=120,
    show_default=True,
    help="Allocators: seconds Z3 may spend on one case; a timeout is reported as unknown.",
)
@click.option(
    "--save-requirements",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Allocators: write a counterexample's requirements CSV here (for wevent trace -r).",
)
@_exsub_prove_options
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def prove_cmd(
    target: str,
    d: int,
    variant: str,
    arithmetic: str,
    w_max: int | None,
    classes: int | None,
    horizon: int | None,
    unbounded: bool,
    declarations: str | None,
    jobs: int,
    timeout: int,
    save_requirements: Path | None,
    dprime: int,
    sparsity: int,
    m: int,
    eps: str | None,
    as_json: bool,
) -> None:
    """Prove a primitive's privacy theorem or an allocator's window theorem, or refute it.

    \b
    Primitives (Z3 over real parameters, plus exhaustive exact checks):
      grr  likelihood ratios of generalized randomized response <= e^eps
      oue  likelihood ratios of optimized unary encoding <= e^eps
      pue  re-perturbation (000 Eq. 8) is valid iff eps_L <= eps_H and yields eps_L reports
      sm   the sampling mechanism's evidence certifies each class's budget
      all  every primitive

    \b
    Allocators (the budget kernel that runs, on Z3 terms):
      uniform sample bd ba pbd pba  fixed (w, eps): every w consecutive slots spend <= eps
      dpbd dpba                     dynamic (001 Def. 10): backward and forward windows
    Every publish/skip decision is free (adversarial); budgets are symbolic positive reals.
    A proof covers every population of 1..--classes classes with windows <= --w-max for
    --horizon slots, or every horizon with --unbounded (k-induction for the fixed kernels; for
    the dynamic ones one-slot steps from a symbolic state, several classes by non-interference).
    A bounded dynamic scope too large to enumerate (over 5,000 cases, e.g. w <= 6 with 2
    classes: 841,752) is proved by that induction, which covers every horizon; the output says
    so. A counterexample is printed as a
    requirements CSV and a --decisions string that `wevent trace` replays to the same failure.

    \b
    Local allocators: lbu lsp lbd lba plbu spend through the fixed kernels (same theorem).
    Population allocators (lpu lpd lpa plpd plpa plpd+ plpa+ and the ablations): no draw ever
    asks the pool for more users than it holds, for every decision sequence, every window tuple
    of 1..--classes classes with windows <= --w-max (default 6), n = 2 w_max .. 3 w_max users,
    --horizon slots (default 3 max w). The OPS allocators (and target ops) also prove the budget
    split: k reports R apart inside w slots never exceed the split (integer arithmetic, n up to
    10^4); the published split is refuted. No user reports twice within R slots by construction
    of the pool.

    \b
    ExSub (004): exsub --dprime D --s S --m M [--eps E] enumerates the samplers' code exactly on
    every s-sparse input of length D: the offline sampler (Algorithm 3) realizes Definition 2,
    the online one (Algorithm 4) has the same distribution, and every likelihood ratio is <= e^eps
    (for every eps > 0, or at E with the runtime's rounded e^-E).

    \b
    Examples:
      wevent prove exsub --dprime 5 --s 2 --m 3
      wevent prove pba                          bounded: w <= 6, 2 classes, 18 slots
      wevent prove pba --unbounded              every horizon (k-induction)
      wevent prove dpba --unbounded --jobs 2    every horizon, w_B, w_F <= 4, 2 classes
      wevent prove dpbd --w-max 6 --classes 2   by induction (the bounded scope is too large)
      wevent prove dpbd --unbounded --w-max 6 --declarations 1
      wevent prove ba --arithmetic float --variant published --classes 1
      wevent prove dpbd --variant published --json

    Exit 0 when proved, 1 on a counterexample (printed; it replays through the guard), 2 on bad
    input, 3 when undecided or timed out (never reported as proved), 4 on a verifier error (a
    counterexample that does not replay: a bug in wevent, never a verdict).
    """
    if target == "exsub":
        _prove_exsub(dprime, sparsity, m, eps, variant, as_json)
    if variant.startswith("printed-"):
        _fail(f"--variant {variant} applies to exsub only")
    if target in _ALLOCATORS:
        from wevent.proofs.central import ALLOCATORS
        from wevent.proofs.counterexamples import ProverError
        from wevent.proving import default_scope, render_proof, run_allocator_proof

        if target not in ALLOCATORS:  # pragma: no cover - the registry holds every choice
            _fail(f"{target}: no proof registered")
        try:
            scope = default_scope(
                target,
                w_max=w_max,
                classes=classes,
                horizon=horizon,
                timeout=timeout,
                unbounded=unbounded,
                declarations=declarations,
            )
            proof = run_allocator_proof(
                target,
                variant=variant,
                arithmetic=arithmetic,
                scope=scope,
                unbounded=unbounded,
                save_requirements=save_requirements,
                workers=jobs or len(os.sched_getaffinity(0)),
            )
        except (BudgetError, OSError) as exc:
            _fail(str(exc))
        except ProverError as exc:
            click.echo(f"wevent prove: verifier error: {exc}", err=True)
            sys.exit(EXIT_VERIFIER)
        if as_json:
            click.echo(json.dumps(proof.to_json(), indent=2))
        else:
            for line in render_proof(proof, save_requirements):
                click.echo(line)
        codes = {"proved": EXIT_OK, "counterexample": EXIT_VIOLATION}
        sys.exit(codes.get(proof.status, EXIT_UNKNOWN))

    if target in _POPULATION_PROOFS:
        if arithmetic != "exact" or unbounded:
            _fail(
                f"{target}: population proofs are bounded and exact (no --arithmetic float, --unbounded)"
            )
        from wevent.proving import render_population, run_population_proof

        try:
            result = run_population_proof(
                target,
                variant=variant,
                w_max=w_max,
                classes=classes,
                horizon=horizon,
                timeout=timeout,
            )
        except BudgetError as exc:
            _fail(str(exc))
        if as_json:
            click.echo(json.dumps(result, indent=2))
        else:
            for line in render_population(result):
                click.echo(line)
        codes = {"proved": EXIT_OK, "counterexample": EXIT_VIOLATION}
        sys.exit(codes.get(result["result"], EXIT_UNKNOWN))

    from wevent.proofs.primitives import PRIMITIVES, prove_primitive

    names = sorted(PRIMITIVES) if target == "all" else [target]
    results = [prove_primitive(name, d) for name in names]
    if as_json:
        click.echo(json.dumps([r.to_json() for r in results], indent=2))
    else:
        for r in results:
            click.echo(f"{r.name}: {r.status.upper()} ({r.seconds:.2f} s)")
            click.echo(f"  theorem: {r.statement}")
            for c in r.checks:
                click.echo(f"  - {c}")
            if r.counterexample:
                click.echo(f"  counterexample: {r.counterexample}")
    statuses = {r.status for r in results}
    if "counterexample" in statuses:
        sys.exit(EXIT_VIOLATION)
    sys.exit(EXIT_UNKNOWN if "unknown" in statuses else EXIT_OK)


_MECHANISMS = MECHANISMS
_POPULATION = frozenset(POPULATION)
_MECHANISM_HELP = """
\b
Central model (001 and Kellaris et al.):
  uniform  eps/w at every slot                    sample  all of eps every w slots
  bd       budget distribution                    ba      budget absorption
  pbd      personalized distribution (001 Alg 4)  pba     personalized absorption (001 Alg 5)
  dpbd     dynamic distribution (001 Alg 6)       dpba    dynamic absorption (001 Alg 7)
\b
Local model, budget division (every user reports every slot; 002 Section 5):
  lbu      eps/w at every slot                    lsp     all of eps every w slots
  lbd      LDP budget distribution (002 Alg 1)    lba     LDP budget absorption (002 Alg 2)
  plbu     eps_i/w_i at every slot, personalized oracle (001 Section 6.2)
\b
Local model, population division (sampled users report once per window; 002 Section 6, 000):
  lpu      n/w fresh users every slot             lpd/lpa  population distribution/absorption
  plpd     personalized distribution (000 Alg 5)  plpa     personalized absorption (000 Alg 6)
  plpd+    with OPS and PUE (000 Alg 3)           plpa+    with OPS and PUE (000 Alg 4)
  plbd-rp, plba-rp    PUE without OPS             plbd-ops, plba-ops  OPS without PUE
uniform, sample, bd, ba and the non-personalized local ones serve every user with the largest
window and the smallest budget.
"""


_TARGET_HELP = """
\b
Third-party allocators (the Allocator protocol of wevent.mechanisms.allocators.api):
  NAME               an entry point of the group wevent.allocators
  module:attribute   an Allocator, or a callable returning one (the current directory is
                     searched first, as with python -m)
"""


_EXSUB_RUN_HELP = """
\b
Whole-stream local model (004):
  exsub    every user picks one hierarchy level, is charged its whole-stream eps once (w = inf
           requirements) and reports its level's residues online through ExSub (Algorithm 4);
           --stream sparse --slots T --d D --sparsity S, or a CSV (categorical values one-hot)
"""


def _exsub_run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--weights",
        type=click.Choice(["uniform", "range", "calibrated", "sqrt-calibrated"]),
        default="uniform",
        show_default=True,
        help="exsub: hierarchy level portions (004 Section IV: uniform for mean queries, range or "
        "calibrated (Section VI-D) for range queries).",
    )(f)
    f = click.option(
        "--fanout",
        type=click.IntRange(min=2, max=64),
        default=2,
        show_default=True,
        help="exsub: fan-out r of the residue hierarchy.",
    )(f)
    return click.option(
        "--sparsity",
        type=click.IntRange(min=1, max=10**6),
        default=4,
        show_default=True,
        help="exsub: s, the public bound on every user's number of changes (a user with more is "
        "refused before the run).",
    )(f)


def _run_exsub(
    requirements: Sequence[Path],
    stream_spec: str,
    slots: int | None,
    seed: int,
    domain: int | None,
    sparsity: int,
    fanout: int,
    weights: str,
    ledger_out: Path | None,
    releases_out: Path | None,
    oracle: str | None,
    variant: str,
    arithmetic: str,
) -> None:
    """`wevent run exsub`: exits 0 when every charge was accepted, 1 when the guard refused one."""
    from wevent.exsub_run import run_exsub

    if oracle is not None or variant != "sound" or arithmetic != "exact":
        _fail("exsub takes no --oracle, --variant or --arithmetic")
    try:
        population = read_requirements(requirements)
        summary = run_exsub(
            population,
            stream_spec,
            slots=slots,
            seed=seed,
            d=domain,
            sparsity=sparsity,
            fanout=fanout,
            weights=weights,
            ledger_path=ledger_out,
            releases_path=releases_out,
        )
    except BudgetError as exc:
        _fail(str(exc))
    for line in summary.describe():
        click.echo(line)
    if ledger_out is not None:
        click.echo(f"  ledger written to {ledger_out}")
    if releases_out is not None:
        click.echo(f"  releases written to {releases_out}")
    sys.exit(EXIT_OK if summary.ok else EXIT_VIOLATION)


def _requirements_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--requirements",
        "-r",
        "requirements",
        multiple=True,
        required=True,
        type=click.Path(path_type=Path),
        help="Requirements CSV (fixed 'user,w,epsilon' or dynamic "
        "'user,slot,w_back,eps_back,w_fwd,eps_fwd'). Repeat to combine files.",
    )(f)


def _variant_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--arithmetic",
        type=click.Choice(["exact", "float"]),
        default="exact",
        show_default=True,
        help="How absorption counts (t_N = eps_l/share - 1) are computed: exactly, or in double "
        "precision as the published code does (budgets stay exact either way).",
    )(f)
    return click.option(
        "--variant",
        type=click.Choice(["sound", "published"]),
        default="sound",
        show_default=True,
        help="'published' runs the papers' pseudo-code as printed (unsound for dpbd/dpba after "
        "a requirement change); see docs/deviations.md.",
    )(f)


@cli.command("trace", epilog=_MECHANISM_HELP + _TARGET_HELP)
@click.argument("mechanism", metavar="MECHANISM")
@_requirements_option
@click.option(
    "--decisions",
    required=True,
    help="Publish (1) / skip (0) per slot, e.g. 1,0,1,1. A decision on a nullified slot is "
    "ignored. The trace runs one slot per decision.",
)
@_variant_options
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Population allocators: seed of the pool's draws (which users report when).",
)
@click.option(
    "--d",
    "domain",
    type=click.IntRange(min=2),
    default=2,
    show_default=True,
    help="Population allocators with OPS: the domain size its error formula uses.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the trace as JSON (exact 'a/b').")
def trace_cmd(
    mechanism: str,
    requirements: Sequence[Path],
    decisions: str,
    variant: str,
    arithmetic: str,
    seed: int,
    domain: int,
    as_json: bool,
) -> None:
    """Run only the budget kernel of MECHANISM against a publish/skip sequence.

    Prints, per slot, whether it was published, skipped or nullified and every user's
    dissimilarity and publication budget as exact rationals. Every trace is charged to the
    runtime guard; a trace that breaks a window ends with the guard's refusal (exit 1), and
    so does a negative budget. Exit 0 when the guard accepted every charge, 2 on bad input.

    Population allocators (lpu ... plba-ops) draw their users from a pool seeded with --seed;
    the trace lists, per slot, how many users were drawn for each part and the budget each
    drawn user paid. A draw the pool cannot serve also ends the trace with exit 1.

    MECHANISM is a built-in name (below), an allocator registered under the entry-point group
    wevent.allocators, or module:attribute (see docs/gate.md, "Gate your allocator in CI");
    `wevent gate` prints its counterexamples as this command.

    \b
    Example (001 Example 7):
      wevent trace dpba -r table3.csv --decisions 1,0,1,0,1 --variant published
    """
    from wevent.mechanisms.allocators.registry import is_population, resolve
    from wevent.verifier.tracing import parse_decisions, trace_population, trace_with_guard

    population_target = mechanism in _POPULATION or is_population(mechanism)
    if not population_target:
        try:
            resolve(mechanism)
        except BudgetError as exc:
            _fail(str(exc))
    if population_target:
        if arithmetic != "exact":
            _fail("--arithmetic float only applies to the central absorption allocators")
        try:
            population = read_requirements(requirements)
            pop_result = trace_population(
                mechanism,
                population,
                parse_decisions(decisions),
                variant=variant,
                seed=seed,
                d=domain,
            )
        except BudgetError as exc:
            _fail(str(exc))
        except Exception as exc:  # a third-party allocator's own failure: one line
            if mechanism in _POPULATION:
                raise
            _fail(f"{mechanism}: the population allocator raised {type(exc).__name__}: {exc}")
        _print_population_trace(pop_result, as_json)
        sys.exit(EXIT_OK if pop_result.ok else EXIT_VIOLATION)
    try:
        population = read_requirements(requirements)
        result = trace_with_guard(
            mechanism,
            population,
            parse_decisions(decisions),
            variant=variant,
            arithmetic=arithmetic,
        )
    except BudgetError as exc:
        _fail(str(exc))
    except Exception as exc:  # a third-party kernel's own failure: one line, no traceback
        if mechanism in _MECHANISMS:
            raise
        _fail(f"{mechanism}: the kernel raised {type(exc).__name__}: {exc}")
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(
            f"{mechanism} ({variant}, {arithmetic} arithmetic): {len(population)} users in "
            f"{len(population.classes)} requirement class(es)"
        )
        for c in population.classes:
            users = ", ".join(c.members[:5]) + (" ..." if c.count > 5 else "")
            click.echo(f"  {c.name}: {c.requirement.describe()} ({users})")
        for s in result.slots:
            parts = [
                f"{c.members[0] if c.count == 1 else c.name} "
                f"dis={format_exact(s.dissimilarity[c.index])} "
                f"pub={format_exact(s.publication[c.index])}"
                for c in population.classes
            ]
            click.echo(f"slot {s.slot}: {s.status:9}  " + "; ".join(parts))
        if result.refusal is not None:
            click.echo(f"REFUSED by the guard: {result.refusal}")
        elif result.negative is not None:
            click.echo(f"INVALID: {result.negative}")
        else:
            click.echo(f"guard: all {len(result.slots)} slots accepted")
    sys.exit(EXIT_OK if result.ok else EXIT_VIOLATION)


def _print_population_trace(result: Any, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    setup, population = result.setup, result.population
    cfg = setup.config
    click.echo(
        f"{result.mechanism} ({result.variant}): {cfg.n} users in {len(population.classes)} "
        f"requirement class(es); {cfg.unit} users per slot, recycled after {cfg.recycle} slots"
    )
    for c in population.classes:
        k = setup.splits[c.index]
        click.echo(
            f"  {c.name}: {c.requirement.describe()}; each report spends "
            f"{format_exact(setup.budgets[c.index])}" + (f" (eps / {k})" if k > 1 else "")
        )
    for s in result.slots:
        drawn = ", ".join(f"{part} {len(users)}" for part, users in s.sampled.items()) or "none"
        click.echo(f"slot {s.slot}: {s.status:9}  pool {s.available:>6}  drawn: {drawn}")
    if result.refusal is not None:
        click.echo(f"REFUSED by the guard: {result.refusal}")
    elif result.shortage is not None:
        click.echo(f"POOL SHORT: {result.shortage}")
    else:
        click.echo(f"guard: all {len(result.slots)} slots accepted")


@cli.command("gate", epilog=_TARGET_HELP)
@click.argument("target", metavar="TARGET")
@click.option(
    "--w-max",
    type=click.IntRange(min=1, max=12),
    default=6,
    show_default=True,
    help="Windows 1..W of the proof and the small search (w^4 shapes per class cap the dynamic "
    "proof at W = 2 bounded with one class, W = 3 by induction for dpbd and dpba).",
)
@click.option(
    "--classes",
    type=click.IntRange(min=1, max=4),
    default=2,
    show_default=True,
    help="Populations of 1..K requirement classes (the float proof uses one).",
)
@click.option(
    "--horizon",
    type=click.IntRange(min=1, max=60),
    default=None,
    help="Slots of the proof's unrolling and of the searched decision sequences [default: 3 * W].",
)
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Inputs the adversarial search tries per requirement kind (fixed, dynamic) at the "
    "proof's scope, before the wide search.",
)
@click.option(
    "--search-runs",
    type=click.IntRange(min=0),
    default=None,
    help="Runs of the wide search per requirement kind, past the proof's scope (a count: the "
    "same seed, the same verdict) [default: 600; 100 for dynamic allocators, 400 population ones].",
)
@click.option(
    "--search-w-max",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Largest window the wide search draws.",
)
@click.option(
    "--search-classes",
    type=click.IntRange(min=1),
    default=6,
    show_default=True,
    help="Most requirement classes in a population the wide search draws.",
)
@click.option(
    "--search-horizon",
    type=click.IntRange(min=1),
    default=None,
    help="Longest run of the wide search, in slots [default: max(256, 4 * --search-w-max)].",
)
@_variant_options
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the search, the conformance inputs and the synthetic streams (the same seed "
    "gives the same verdict).",
)
@click.option(
    "--timeout",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Seconds Z3 may spend on one proof case (a timeout leaves the proof unknown).",
)
@click.option(
    "--require-proof",
    is_flag=True,
    help="Exit 3 unless the Z3 proof holds (by default a clean search passes without one).",
)
@click.option(
    "--junit",
    "junit_out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a JUnit XML report (one test case per check).",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the report as JSON ('-' for stdout).",
)
@click.option(
    "--save-requirements",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write a counterexample's requirements CSV here (the replay command names it).",
)
def gate_cmd(
    target: str,
    w_max: int,
    classes: int,
    horizon: int | None,
    examples: int,
    search_runs: int | None,
    search_w_max: int,
    search_classes: int,
    search_horizon: int | None,
    variant: str,
    arithmetic: str,
    seed: int,
    timeout: int,
    require_proof: bool,
    junit_out: Path | None,
    json_out: Path | None,
    save_requirements: Path | None,
) -> None:
    """Gate an allocator for CI: prove it, or refute it with a minimal counterexample.

    TARGET is a built-in budget allocator (uniform ... dpba, lbu ... plbu), a built-in
    population allocator (lpu ... plba-ops), an allocator registered under the entry-point
    group wevent.allocators, or module:attribute naming an Allocator
    (wevent.mechanisms.allocators.api) or a callable returning one.

    \b
    Checks, in order (each is a test case of the JUnit report):
      conformance  the protocol; the kernel is deterministic; it scales as it claims
                   (per-class / global); on Z3 terms it computes what it computes exactly
      proof        Z3 window theorem over the scope (bounded) when the kernel runs on Z3
                   terms; --arithmetic float: exhaustive search on float counts instead
      search       hypothesis: fixed (and dynamic) populations and publish/skip sequences
                   through the runtime guard, then far wider (--search-*: w <= 64, 6
                   classes, 256 slots), shrunk to a minimal counterexample
      end-to-end   the central data path on synthetic streams, guard in the loop, ledger
                   batch-checked

    \b
    Population allocators (users drawn from a pool, recycled after R slots):
      conformance  determinism (same pool seed, same users; counts independent of who was
                   drawn); Z3 terms = exact values
      proof        the OPS split theorem (OPS allocators), that no draw exceeds the pool
                   and that every drawn user's windows hold
      search       populations with user counts and decisions through the pool and the guard
      end-to-end   wevent run's data path on synthetic streams, ledger batch-checked

    A counterexample is printed as a requirements CSV and a decision string; the printed
    `wevent trace TARGET -r FILE --decisions ...` replays it through the guard (write FILE
    with --save-requirements).

    \b
    Examples:
      wevent gate pba
      wevent gate ba --variant published --arithmetic float --save-requirements cex.csv
      wevent gate mypkg.alloc:allocator --junit gate.xml --json gate.json

    Exit 0 proved or passed, 1 refuted, 2 unusable target (it does not load, breaks the
    protocol, or its kernel raises; one line on stderr), 3 with --require-proof when no proof
    holds, 4 verifier error (a proof's counterexample that does not replay: a bug in wevent,
    not a verdict).
    """
    from wevent.gate import GateOptions, run_gate

    options = GateOptions(
        w_max=w_max,
        classes=classes,
        horizon=horizon or 0,
        examples=examples,
        variant=variant,
        arithmetic=arithmetic,
        seed=seed,
        timeout=timeout,
        require_proof=require_proof,
        search_runs=-1 if search_runs is None else search_runs,
        search_w_max=search_w_max,
        search_classes=search_classes,
        search_horizon=search_horizon or 0,
    )
    for path in (junit_out, json_out, save_requirements):
        if path is not None and str(path) != "-":
            parent = path.parent if str(path.parent) else Path(".")
            if not parent.is_dir():
                _fail(f"{path}: directory {parent} does not exist")
    try:
        report = run_gate(target, options, save_requirements=save_requirements)
    except OSError as exc:
        _fail(f"cannot write {save_requirements}: {exc.strerror or exc}")
    try:
        if junit_out is not None:
            junit_out.write_text(report.junit_xml(), encoding="utf-8")
        if json_out is not None:
            text = json.dumps(report.to_json(), indent=2) + "\n"
            if str(json_out) == "-":
                click.echo(text, nl=False)
            else:
                json_out.write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write the report: {exc.strerror or exc}")
    reason = report.unusable_reason
    if reason is not None:
        _fail(f"unusable target: {reason if reason.startswith(target) else f'{target}: {reason}'}")
    if str(json_out) != "-":
        for line in report.describe():
            click.echo(line)
    sys.exit(report.exit_code)


@cli.command("run", epilog=_MECHANISM_HELP + _EXSUB_RUN_HELP)
@click.argument("mechanism", type=click.Choice([*_MECHANISMS, "exsub"]))
@_requirements_option
@click.option(
    "--stream",
    "stream_spec",
    required=True,
    help="lns, sin or log (the synthetic binary streams of 001 Section 6.1) or a CSV file "
    "'user,slot,value' with integer values 0..d-1. exsub: 'sparse' (s changes per user) or a CSV.",
)
@click.option(
    "--slots",
    type=click.IntRange(min=1, max=10**7),
    default=None,
    help="Number of slots to run (required for synthetic streams; default for a CSV: all).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of data and noise (a non-negative integer).",
)
@click.option(
    "--domain",
    "--d",
    "domain",
    type=click.IntRange(min=1),
    default=None,
    help="Number of values d: of a CSV stream (default: largest value + 1), or of a "
    "synthetic stream, which is categorical when d > 2 (default 2, binary).",
)
@click.option(
    "--oracle",
    type=click.Choice(["grr", "oue"]),
    default=None,
    help="Frequency oracle of lbu, lsp, lbd, lba, lpu, lpd, lpa (default grr); the "
    "personalized local allocators always use the personalized oracle (GRR per budget).",
)
@click.option(
    "--ledger",
    "ledger_out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the ledger here (.jsonl, .csv or .parquet).",
)
@click.option(
    "--releases",
    "releases_out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the releases here (CSV slot,status,cell,release,truth).",
)
@_variant_options
@_exsub_run_options
def run_cmd(
    mechanism: str,
    requirements: Sequence[Path],
    stream_spec: str,
    slots: int | None,
    seed: int,
    domain: int | None,
    oracle: str | None,
    ledger_out: Path | None,
    releases_out: Path | None,
    variant: str,
    arithmetic: str,
    sparsity: int,
    fanout: int,
    weights: str,
) -> None:
    """Run MECHANISM end to end on a stream with the runtime guard in the loop.

    Every charge passes the guard before noise is drawn. The ledger and releases are written
    even when the guard stops the run (exit 1); exit 0 means every slot ran and every charge
    was accepted; 2 is bad input. The same seed gives the same releases and ledger.

    \b
    Example:
      wevent run pba -r requirements.csv --stream sin --slots 1000 --ledger run.jsonl
      wevent check run.jsonl -r requirements.csv
    """
    from wevent.experiments.running import open_stream, run_mechanism

    if mechanism == "exsub":
        _run_exsub(
            requirements,
            stream_spec,
            slots,
            seed,
            domain,
            sparsity,
            fanout,
            weights,
            ledger_out,
            releases_out,
            oracle,
            variant,
            arithmetic,
        )
    try:
        population = read_requirements(requirements)
        stream = open_stream(stream_spec, population, slots, seed, domain)
        total = slots if slots is not None else stream.slots
        bar: Any = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=total, desc=mechanism, unit="slot", leave=False, file=sys.stderr)
        summary = run_mechanism(
            mechanism,
            population,
            stream,
            slots=total,
            seed=seed,
            variant=variant,
            arithmetic=arithmetic,
            ledger_path=ledger_out,
            releases_path=releases_out,
            progress=None if bar is None else bar.update,
            oracle=oracle,
        )
        if bar is not None:
            bar.close()
    except BudgetError as exc:
        _fail(str(exc))
    for line in summary.describe():
        click.echo(line)
    if ledger_out is not None:
        click.echo(f"  ledger written to {ledger_out}")
    if releases_out is not None:
        click.echo(f"  releases written to {releases_out}")
    sys.exit(EXIT_OK if summary.ok else EXIT_VIOLATION)


def _experiment_list() -> str:
    from wevent.experiments.registry import ALL, EXPERIMENTS

    lines = [f"  {name:<16} {exp.summary}" for name, exp in EXPERIMENTS.items()]
    lines.append(f"  {ALL:<16} every experiment above, each into OUT/NAME")
    return "\b\nExperiments:\n" + "\n".join(lines)


@cli.command("reproduce", epilog=_experiment_list())
@click.argument("experiment")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Directory for results.csv, runs.csv, table.md and the PNG plots "
    "(default: reproduction/EXPERIMENT).",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1, max=1000),
    default=None,
    help="Runs per setting, averaged (default: 10 as the papers, 1 with --quick).",
)
@click.option(
    "--quick",
    is_flag=True,
    help="Small smoke-test size (5,000 users, 200-300 slots, 3 sweep points): minutes, not hours.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Repeat r uses seed SEED + r for the population, the stream and the noise.",
)
@click.option(
    "--users",
    type=click.IntRange(min=1, max=10**8),
    default=None,
    help="Override the number of users of every run (default: the paper's, or the quick size).",
)
@click.option(
    "--slots",
    type=click.IntRange(min=1, max=10**7),
    default=None,
    help="Override the number of slots of every run (default: the paper's, or the quick size).",
)
def reproduce_cmd(
    experiment: str,
    out_dir: Path | None,
    repeats: int | None,
    quick: bool,
    seed: int,
    users: int | None,
    slots: int | None,
) -> None:
    """Re-run one of the papers' experiments on the synthetic streams (TLNS, Sin, Log).

    Every run goes through the runtime guard (a refused charge stops the command, exit 1).
    Writes results.csv (long form: experiment,dataset,mechanism,epsilon,w,metric,value,std,
    setting), runs.csv (one line per run), table.md (the papers' layout) and one PNG per
    metric. The same seed gives the same files. Full sizes are the papers' (e.g. 200,000 users
    x 800 slots for 002) and take hours; --quick, --users and --slots make them smaller.

    \b
    Example:
      wevent reproduce pwsm-epsilon --quick --out out/pwsm
      wevent reproduce ldp-ids-w --users 20000 --slots 800 --repeats 3
    """
    missing = require("reproduce", "report")  # plots, checked before hours of runs
    if missing is not None:
        _fail(missing)
    from wevent.experiments.harness import GuardRefused
    from wevent.experiments.registry import run_experiment

    out = out_dir if out_dir is not None else Path("reproduction") / experiment
    try:
        if out.exists() and not out.is_dir():
            raise BudgetError(f"--out: {out} exists and is not a directory")
        files = run_experiment(
            experiment,
            out,
            repeats if repeats is not None else (1 if quick else 10),
            quick,
            seed,
            users=users,
            slots=slots,
        )
    except BudgetError as exc:
        _fail(str(exc))
    except GuardRefused as exc:
        click.echo(f"wevent: guard refused a charge: {exc}", err=True)
        sys.exit(EXIT_VIOLATION)
    except OSError as exc:
        _fail(f"cannot write the results: {exc}")
    for path in files:
        click.echo(f"wrote {path}")


@cli.group("prepare")
def prepare_group() -> None:
    """Turn a real data set's public files into a 'user,slot,value' CSV stream.

    The output is what 'wevent run --stream FILE' reads. Where to get the data: docs/reproduction.md,
    section 'Real data sets'.
    """


def _write_prepared(obs: Any, out: Path) -> None:
    from wevent.mechanisms.datasets import write_observations

    write_observations(obs, out)
    click.echo(
        f"wrote {out}: {len(obs.users)} users, {obs.slots} slots, d = {len(obs.values)} values, "
        f"{len(obs.slot)} observations"
    )


_fill_option = click.option(
    "--fill",
    is_flag=True,
    help="Give every user a value at every slot (last value carried forward, first value "
    "backward), as the population allocators need.",
)


@prepare_group.command("tdrive")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--grid",
    type=click.IntRange(min=1, max=1000),
    default=10,
    show_default=True,
    help="Cut the area into GRID x GRID cells (d = GRID^2; 001 uses 10).",
)
@click.option(
    "--interval",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Slot length in seconds (001: one minute).",
)
@_fill_option
def prepare_tdrive_cmd(
    files: Sequence[Path], out: Path, grid: int, interval: int, fill: bool
) -> None:
    """T-Drive taxi files (one per taxi: 'taxi_id,datetime,longitude,latitude'), gridded over
    longitude 116-116.8 and latitude 39.5-40.3 as in 001 Section 6.1.

    \b
    Example:
      wevent prepare tdrive release/taxi_log_2008_by_id/*.txt --out taxi.csv --fill
    """
    from wevent.mechanisms.datasets import tdrive_observations

    paths: list[Path] = []
    for f in files:
        paths.extend(sorted(f.glob("*.txt")) if f.is_dir() else [f])
    try:
        _write_prepared(tdrive_observations(paths, grid=grid, interval=interval, fill=fill), out)
    except BudgetError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot write {out}: {exc.strerror or exc}")


@prepare_group.command("foursquare")
@click.argument("checkins", type=click.Path(path_type=Path))
@click.argument("pois", type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--interval",
    type=click.IntRange(min=1),
    default=6000,
    show_default=True,
    help="Slot length in seconds (001: 100 minutes).",
)
@click.option(
    "--fraction",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=1.0,
    show_default=True,
    help="Keep this seeded fraction of the users (001: 0.05).",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@_fill_option
def prepare_foursquare_cmd(
    checkins: Path, pois: Path, out: Path, interval: int, fraction: float, seed: int, fill: bool
) -> None:
    """Foursquare global check-ins (tab-separated CHECKINS: user, venue, UTC time, offset;
    POIS: venue, latitude, longitude, category, country): each check-in becomes its venue's
    country, as in 001 Section 6.1 and 002 Section 7.1.2.

    \b
    Example:
      wevent prepare foursquare dataset_TIST2015_Checkins.txt dataset_TIST2015_POIs.txt \\
          --out foursquare.csv --fraction 0.05 --fill
    """
    from wevent.mechanisms.datasets import foursquare_observations

    try:
        obs = foursquare_observations(
            checkins, pois, interval=interval, fraction=fraction, seed=seed, fill=fill
        )
        _write_prepared(obs, out)
    except BudgetError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot write {out}: {exc.strerror or exc}")


@cli.command("demo")
def demo_cmd() -> None:
    """Run the main job on the bundled examples and print the verdicts.

    Two ledgers are checked against the same requirements (fixed, whole-stream and dynamic
    users from paper 001 Table 3): one compliant, including exact ties such as three spends of
    0.1 under a bound of 0.3, and one with fixed, dynamic backward, dynamic forward and
    whole-stream violations and a charge whose evidence does not cover it.
    """
    missing = require("demo", "audit", "prove", "report")  # it shows every part of wevent
    if missing is not None:
        _fail(missing)
    from wevent.demo import run_demo

    sys.exit(EXIT_OK if run_demo(click.echo) else EXIT_VIOLATION)


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry point."""
    # Exact sums can have many digits; printing them must not hit Python's int-to-str limit.
    sys.set_int_max_str_digits(0)
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        return cli.main(args=args, prog_name="wevent")
    except InputError as exc:  # a safety net: commands catch their own
        _fail(str(exc))
    except ModuleNotFoundError as exc:  # an optional dependency: name the extra, one line
        hint = missing_extra(exc, next((a for a in args if not a.startswith("-")), ""))
        if hint is None:
            raise
        _fail(hint)
    return None
