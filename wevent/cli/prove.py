"""`wevent prove`: a group of four subcommands, one per kind of theorem."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from wevent.cli._common import (
    DEFAULT_W_MAX,
    EXIT_VERIFIER,
    STATUS_EXIT,
    VARIANT_CHOICES,
    Choice,
    check_writable,
    did_you_mean,
    emit_json,
    fail,
    json_option,
    scope_options,
)
from wevent.cli._group import WeventGroup
from wevent.errors import InputError
from wevent.mechanisms.allocators import CENTRAL, LOCAL_BUDGET, POPULATION

__all__ = ["prove_group"]

PRIMITIVES = ("grr", "oue", "pue", "sm")
ALLOCATORS = (*CENTRAL, *LOCAL_BUDGET)
POPULATION_PROOFS = (*POPULATION, "ops")
_KINDS = {
    **{name: "primitive" for name in (*PRIMITIVES, "all")},
    **{name: "allocator" for name in ALLOCATORS},
    **{name: "population" for name in POPULATION_PROOFS},
    "exsub": "exsub",
}


_WHAT = {"all": "every primitive", "ops": "the OPS budget split", "exsub": "ExSub (004)"}
_ARTICLE = {
    "primitive": "a primitive",
    "allocator": "an allocator",
    "population": "a population allocator",
}


def _old_form(name: str) -> str | None:
    """Where a name is proved: `wevent prove pba` (the form before the subcommands), or a name
    given to the wrong subcommand, gets the command that proves it."""
    kind = _KINDS.get(name)
    if kind is None:
        return None
    command = f"wevent prove {kind}" if kind == name else f"wevent prove {kind} {name}"
    if name in _WHAT:
        return f"{name!r} ({_WHAT[name]}): use '{command}'"
    return f"{name!r} is {_ARTICLE[kind]}: use '{command}'" if kind != name else None


def _known(kind: str, name: str, names: tuple[str, ...]) -> None:
    """Refuse a NAME this subcommand does not prove, naming the one that does."""
    if name in names:
        return
    hint = _old_form(name)
    fail(hint if hint is not None else f"no {kind} {name!r}{did_you_mean(name, names)}")


@click.group(
    "prove",
    cls=WeventGroup,
    unknown_hint=_old_form,
    short_help="Prove a primitive, allocator, population allocator or ExSub.",
)
def prove_group() -> None:
    """Prove a theorem about the code that runs, or refute it with a counterexample.

    \b
      wevent prove primitive grr|oue|pue|sm|all   the noise primitives' privacy theorems
      wevent prove allocator ALLOCATOR            an allocator's window theorem
      wevent prove population NAME                a population allocator's pool theorems
      wevent prove exsub                          ExSub's sampler theorems (004)

    Every verdict is PROVED (with the scope it covers), CHECKED (primitives only: a finite set
    of exact checks passed, named on the same line; not a proof), REFUTED (with a
    counterexample that replays through the guard) or UNKNOWN (a timeout; never reported as
    proved). Exit 0 proved or checked, 1 refuted, 2 bad input, 3 unknown, 4 verifier error (a
    counterexample that does not replay: a bug in wevent, never a verdict).
    """


@prove_group.command("primitive", short_help="A noise primitive's privacy theorem.")
@click.argument("name", metavar="NAME")
@click.option(
    "--domain",
    type=click.IntRange(min=2, max=64),
    default=5,
    show_default=True,
    help="Domain size of the fixed-d and exhaustive checks (OUE enumerates 2^d outputs for "
    "d <= 8).",
)
@json_option("The results")
def primitive_cmd(name: str, domain: int, json_out: str | None) -> None:
    """Prove a noise primitive's privacy theorem (Z3 over real parameters, PROVED), and check
    the code's rounded parameters with exact rationals at a finite set of budgets.

    \b
      grr  likelihood ratios of generalized randomized response <= e^eps
      oue  likelihood ratios of optimized unary encoding <= e^eps
      pue  re-perturbation (000 Eq. 8) is valid iff eps_L <= eps_H and yields eps_L reports
      sm   the sampling mechanism's evidence certifies each class's budget (CHECKED only: a
           finite set of thresholds and budgets, no solver)
      all  every primitive

    The first line of each result gives its scope: what Z3 proved, and the finite set checked.

    \b
    Example:
      wevent prove primitive grr --domain 5
    """
    _known("primitive", name, (*PRIMITIVES, "all"))
    from wevent.proofs.primitives import PRIMITIVES as REGISTERED
    from wevent.proofs.primitives import prove_primitive

    names = sorted(REGISTERED) if name == "all" else [name]
    results = [prove_primitive(n, domain) for n in names]
    if emit_json(json_out, [r.to_json() for r in results]):
        for r in results:
            click.echo(f"{r.name}: {_primitive_verdict(r.status, r.scope())} ({r.seconds:.2f} s)")
            click.echo(f"  theorem: {r.statement}")
            for c in r.checks:
                click.echo(f"  - {c}")
            if r.counterexample:
                click.echo(f"  counterexample: {r.counterexample}")
    statuses = {r.status for r in results}
    if "counterexample" in statuses:
        worst = "counterexample"
    elif statuses <= {"proved", "checked"}:
        worst = "proved" if statuses == {"proved"} else "checked"
    else:
        worst = "unknown"
    sys.exit(STATUS_EXIT[worst])


def _primitive_verdict(status: str, scope: str) -> str:
    """The first line's verdict with its scope: PROVED only when Z3 proved the statement over
    real parameters, CHECKED when only a finite set of exact checks ran."""
    if status == "proved":
        return f"PROVED ({scope})"
    if status == "checked":
        return f"CHECKED, not proved ({scope})"
    return {"counterexample": "REFUTED"}.get(status, "UNKNOWN") + f" (scope: {scope})"


@prove_group.command("allocator", short_help="A built-in allocator's window theorem.")
@click.argument("allocator", metavar="ALLOCATOR")
@click.option(
    "--variant",
    type=Choice(VARIANT_CHOICES),
    default="sound",
    show_default=True,
    help="'published' is the papers' pseudo-code as printed (docs/deviations.md); 'du-code' "
    "(bd, ba, pbd, pba, dpbd, dpba) the rules of Du et al.'s public code, 'streamdp-code' "
    "(dsat) those of streamdp-benchmark (docs/peers.md).",
)
@click.option(
    "--arithmetic",
    type=Choice(["exact", "float"]),
    default="exact",
    show_default=True,
    help="Absorption counts exact, or in doubles as published code computes them (budgets "
    "then range over the decimals 0.1, 0.2, ..., 1 and every decision sequence is explored).",
)
@scope_options
@click.option(
    "--unbounded",
    is_flag=True,
    help="Prove for every horizon: k-induction for the fixed kernels; for the dynamic ones "
    "one-slot steps from a symbolic state (exact arithmetic only).",
)
@click.option(
    "--declarations",
    default=None,
    metavar="SLOTS",
    help="Dynamic kernels: the slots at which each class declares a requirement, e.g. 1 or "
    "1,3 [default: 1,2].",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=0, max=64),
    default=0,
    show_default=True,
    help="Processes sharing the dynamic induction's window shapes (0: one per core).",
)
@click.option(
    "--save-requirements",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write a counterexample's requirements CSV here (for wevent trace -r).",
)
@json_option("The proof")
def allocator_cmd(
    allocator: str,
    variant: str,
    arithmetic: str,
    w_max: int | None,
    classes: int,
    unroll: int | None,
    timeout: int,
    unbounded: bool,
    declarations: str | None,
    jobs: int,
    save_requirements: Path | None,
    json_out: str | None,
) -> None:
    """Prove a built-in allocator's window theorem on the budget kernel that runs (Z3
    terms), or refute it.

    \b
      uniform sample bd ba pbd pba  fixed (w, eps): every w consecutive slots spend <= eps
      dpbd dpba                     dynamic (001 Def. 10): backward and forward windows
      lbu lsp lbd lba plbu          local budget division: the fixed kernels' theorem

    Every publish/skip decision is free (adversarial); budgets are symbolic positive reals.
    A proof covers every population of 1..--classes classes with windows <= --w-max for
    --unroll slots, or every horizon with --unbounded. A bounded dynamic scope too large to
    enumerate (over 5,000 cases) is proved by the one-slot induction, which covers every
    horizon (sound and published variants; du-code is enumerated); the output says so. A
    counterexample is printed as a requirements CSV and a --decisions string that `wevent
    trace` replays to the same failure. Your own allocator:
    `wevent gate module:attribute` proves it.

    \b
    Examples:
      wevent prove allocator pba                    w <= 6, 2 classes, 18 slots
      wevent prove allocator pba --unbounded        every horizon (k-induction)
      wevent prove allocator dpba --w-max 4 --jobs 2
      wevent prove allocator ba --arithmetic float --variant published --classes 1
    """
    from wevent.proofs.central import ALLOCATORS as REGISTERED
    from wevent.proofs.counterexamples import ProverError
    from wevent.proving import default_scope, render_proof, run_allocator_proof

    if allocator not in REGISTERED:
        hint = _old_form(allocator)
        if hint is not None:
            fail(hint)
        fail(
            f"no built-in allocator {allocator!r}{did_you_mean(allocator, REGISTERED)}; "
            "your own allocator: wevent gate module:attribute"
        )
    check_writable(save_requirements, json_out)
    try:
        scope = default_scope(
            allocator,
            w_max=w_max,
            classes=classes,
            horizon=unroll,
            timeout=timeout,
            unbounded=unbounded,
            declarations=declarations,
        )
        proof = run_allocator_proof(
            allocator,
            variant=variant,
            arithmetic=arithmetic,
            scope=scope,
            unbounded=unbounded,
            save_requirements=save_requirements,
            workers=jobs or len(os.sched_getaffinity(0)),
        )
    except InputError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename}: cannot write ({exc.strerror})" if exc.filename else str(exc))
    except ProverError as exc:
        click.echo(f"wevent prove allocator: verifier error: {exc}", err=True)
        sys.exit(EXIT_VERIFIER)
    if emit_json(json_out, proof.to_json()):
        for line in render_proof(proof, save_requirements):
            click.echo(line)
    sys.exit(STATUS_EXIT[proof.status])


@prove_group.command("population", short_help="A population allocator's pool and window theorems.")
@click.argument("name", metavar="NAME")
@click.option(
    "--variant",
    type=Choice(["sound", "published", "du-code"]),
    default="sound",
    show_default=True,
    help="'published' is the papers' OPS split as printed (docs/deviations.md); 'du-code' "
    "(plpd+, plpa+, plbd-ops, plba-ops, ops) adds the recycle period of Du et al.'s public "
    "code (docs/peers.md).",
)
@scope_options
@json_option("The proof")
def population_cmd(
    name: str,
    variant: str,
    w_max: int | None,
    classes: int,
    unroll: int | None,
    timeout: int,
    json_out: str | None,
) -> None:
    """Prove a population allocator's theorems: no draw ever asks the pool for more users
    than it holds, and every drawn user's windows hold.

    For every decision sequence, every window tuple of 1..--classes classes with windows
    <= --w-max, n = 2 w_max .. 3 w_max users, --unroll slots. The OPS allocators (and NAME
    ops) also prove the budget split: k reports R apart inside w slots never exceed the split
    (integer arithmetic, n up to 10^4); the published split and du-code are refuted. No user
    reports twice within R slots by construction of the pool.

    \b
    Names: lpu lpd lpa plpd plpa plpd+ plpa+ plbd-rp plba-rp plbd-ops plba-ops, and ops.

    \b
    Example:
      wevent prove population plpa+ --w-max 2
    """
    _known("population allocator", name, POPULATION_PROOFS)
    from wevent.proving import render_population, run_population_proof

    check_writable(json_out)
    try:
        result = run_population_proof(
            name,
            variant=variant,
            w_max=w_max or DEFAULT_W_MAX,
            classes=classes,
            horizon=unroll,
            timeout=timeout,
        )
    except InputError as exc:
        fail(str(exc))
    if emit_json(json_out, result):
        for line in render_population(result):
            click.echo(line)
    sys.exit(STATUS_EXIT[result["result"]])


@prove_group.command("exsub", short_help="ExSub's sampler theorems (004).")
@click.option(
    "--domain",
    type=click.IntRange(min=2, max=12),
    default=5,
    show_default=True,
    help="Vector length d' (inputs enumerated: C(d', s) 2^s; d' <= 6 takes seconds).",
)
@click.option(
    "--sparsity",
    type=click.IntRange(min=1, max=11),
    default=2,
    show_default=True,
    help="Sparsity s: non-zero entries of the input (s < d').",
)
@click.option(
    "--m",
    "m",
    type=click.IntRange(min=1, max=12),
    default=3,
    show_default=True,
    help="Output size m (at most d').",
)
@click.option(
    "--eps",
    default=None,
    help="Prove at this epsilon (exact, e.g. 1 or 1/2) with the runtime's rounded e^-eps "
    "instead of for every eps > 0.",
)
@click.option(
    "--variant",
    type=Choice(["sound", "printed-offline", "printed-online", "published"]),
    default="sound",
    show_default=True,
    help="'printed-offline' / 'printed-online' run 004 Algorithm 3 line 13 / Algorithm 4 as "
    "printed.",
)
@json_option("The proof")
def exsub_cmd(
    domain: int, sparsity: int, m: int, eps: str | None, variant: str, json_out: str | None
) -> None:
    """Prove ExSub's theorems (004) by enumerating the samplers' code exactly on every
    s-sparse input of length d': the offline sampler (Algorithm 3) realizes Definition 2, the
    online one (Algorithm 4) has the same distribution, and every likelihood ratio is <= e^eps
    (for every eps > 0, or at --eps with the runtime's rounded e^-eps).

    \b
    Example:
      wevent prove exsub --domain 5 --sparsity 2 --m 3
    """
    from wevent.accounting.budget import parse_exact
    from wevent.proofs.exsub import prove_exsub

    if variant == "published":
        fail("exsub: use --variant printed-offline or printed-online for 004's pseudo-code")
    check_writable(json_out)
    try:
        value = None if eps is None else parse_exact(eps, what="--eps")
        if value is not None and value <= 0:
            raise InputError(f"--eps must be positive, got {eps}")
        if not sparsity < domain or m > domain:
            raise InputError(
                f"exsub needs --sparsity < --domain and --m <= --domain (got domain {domain}, "
                f"sparsity {sparsity}, m {m})"
            )
        proof = prove_exsub(domain, sparsity, m, value, variant)
    except InputError as exc:
        fail(str(exc))
    if emit_json(json_out, proof.to_json()):
        label = {"proved": "PROVED", "counterexample": "REFUTED", "unknown": "UNKNOWN"}
        eps_scope = "every eps > 0" if value is None else f"eps = {eps}"
        click.echo(
            f"exsub ({variant}): {label[proof.status]} for d' = {domain}, s = {sparsity}, "
            f"m = {m}, {eps_scope} ({proof.inputs} inputs, {proof.outputs} outputs, "
            f"{proof.seconds:.2f} s)"
        )
        click.echo(f"  theorem: {proof.statement}")
        for c in proof.checks:
            click.echo(f"  - {c}")
        if proof.counterexample:
            click.echo(f"  counterexample: {proof.counterexample}")
    sys.exit(STATUS_EXIT.get(proof.status, STATUS_EXIT["unknown"]))
