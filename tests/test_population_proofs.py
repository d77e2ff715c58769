"""The OPS split theorem (wevent/proofs/population.py): sound proved, published refuted, and the
counterexample is a real one (its reports fit the window and exceed the split)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from wevent.mechanisms.allocators.algebra import ExactAlgebra
from wevent.mechanisms.allocators.kernel import FixedClass
from wevent.mechanisms.allocators.local import POPULATION, population_setup
from wevent.mechanisms.allocators.population import PopulationConfig, PopulationKernel
from wevent.mechanisms.ops import reports_within
from wevent.mechanisms.pool import PoolExhausted, UserPool
from wevent.proofs.population import (
    check_pool,
    explore_pool,
    prove_ops_split,
    prove_pool,
    prove_population,
)


def test_sound_split_is_proved() -> None:
    result = prove_ops_split("sound", n_max=2000, w_max=100)
    assert result.status == "proved", result
    assert result.to_json()["result"] == "proved"


def test_published_split_is_refuted_with_a_real_counterexample() -> None:
    result = prove_ops_split("published", n_max=400, w_max=40)
    assert result.status == "counterexample"
    cex = result.counterexample
    n, w_o, w, k = cex["n"], cex["w_o"], cex["w"], cex["k"]
    z = n // (2 * w_o)
    recycle = n // (2 * z)
    z_w = n // (2 * w)
    split = -(-z // z_w) if z_w < z else 1
    assert (cex["z"], cex["R"], cex["split"]) == (z, recycle, split)
    assert (k - 1) * recycle <= w - 1 and k <= reports_within(w, recycle)
    assert k > split
    assert (n, w) == (10, 5)  # minimized: the smallest n, then window (the guard fixture's shape)


POOL_SCOPE = {2: 5, 3: 7}  # 12 users, windows 2 and 3: R = 3 (w_max), horizon 3 R


@pytest.mark.parametrize("mechanism", ["lpu", "lpd", "lpa", "plpd", "plpa", "plpd+", "plpa+"])
@pytest.mark.parametrize("variant", ["sound", "published"])
def test_population_kernels_never_exhaust_the_pool(mechanism: str, variant: str) -> None:
    result = prove_pool(mechanism, POOL_SCOPE, horizon=9, variant=variant)
    assert result.status == "proved", result
    assert result.to_json()["result"] == "proved"


# Windows <= 4 in the default suite (about 2 s each); w <= 6 (20-25 s each for the absorbing
# kernels) is `make slow` (the fresh-clone `make test` stays under 10 minutes).
@pytest.mark.heavy
@pytest.mark.parametrize("w_max", [4, pytest.param(6, marks=pytest.mark.slow)])
@pytest.mark.parametrize("mechanism", POPULATION)
def test_sound_population_kernels_proved_for_windows_up_to(mechanism: str, w_max: int) -> None:
    """Every tuple of 1..2 distinct windows <= w_max, n = 2 max w .. 3 max w users, horizon
    3 max w (with OPS first proving its split for n <= 10^4)."""
    result = prove_population(mechanism, variant="sound", w_max=w_max, classes=2)
    assert result["result"] == "proved", result
    pool, windows = result["theorems"][-2:]
    # tuples whose largest window is m: m of them, each for m + 1 pool sizes
    assert pool["theorem"] == "pool-never-short"
    assert pool["cases"] == sum(m * (m + 1) for m in range(1, w_max + 1))
    assert pool["scope"]["w"] == [1, w_max] and pool["scope"]["classes"] == [1, 2]
    # every drawn user's windows, for each case and budget assignment
    assert windows["theorem"] == "user-windows" and windows["result"] == "proved"
    assert windows["cases"] == 3 * pool["cases"]


@pytest.mark.parametrize("mechanism", ["lpu", "lpd", "lpa", "plpd", "plpa", "plpd+", "plpa+"])
@pytest.mark.parametrize("variant", ["sound", "published"])
def test_explicit_search_and_z3_agree(mechanism: str, variant: str) -> None:
    """The two pool checks decide the same question: same verdict on the same scope."""
    explicit = prove_pool(mechanism, {2: 4, 4: 5}, horizon=10, variant=variant, method="explicit")
    symbolic = prove_pool(mechanism, {2: 4, 4: 5}, horizon=10, variant=variant, method="z3")
    assert explicit.status == symbolic.status == "proved"


def test_explicit_search_finds_the_overspending_mutant() -> None:
    """The search can fail: publications allowed all n users per window run the pool dry, at
    the same first slot as Z3 finds."""
    good = population_setup("lpd", [FixedClass(3, Fraction(1))], [12], 2).config
    bad = PopulationConfig(good.n, good.rule, good.unit, good.recycle, good.n, good.absorb_cap)
    explicit = explore_pool("lpd", bad, (3,), 9, "published", "mutant")
    symbolic = check_pool("lpd", bad, (3,), 9, "published", "mutant")
    assert explicit.status == symbolic.status == "counterexample"
    assert explicit.slot == min(symbolic.slot, explicit.slot)
    absorbing = population_setup("lpa", [FixedClass(3, Fraction(1))], [12], 2).config
    greedy = PopulationConfig(
        absorbing.n, "absorption", absorbing.unit, absorbing.recycle, 0, Fraction(12)
    )  # absorbs up to 12 slots' units: more than the pool holds
    assert explore_pool("lpa", greedy, (3,), 12, "published", "mutant").status == "counterexample"


@pytest.mark.parametrize("variant", ["sound", "published"])
def test_plpa_plus_with_a_fractional_w_opt_never_exhausts_the_pool(variant: str) -> None:
    """14 users, w = 3: z_opt = 2, w_opt = 7/2, R = 3; published PLPA+ absorbs up to
    floor(2 * 7/2) = 7 users, more than R units (6)."""
    choice = population_setup("plpa+", [FixedClass(3, Fraction(1))], [14], 2).ops
    assert choice is not None and choice.w_opt == Fraction(7, 2) and choice.recycle == 3
    result = prove_pool("plpa+", {3: 14}, horizon=12, variant=variant)
    assert result.status == "proved", result


def test_a_kernel_spending_every_user_on_publications_is_refuted_and_replays() -> None:
    """A mutant that lets publications use all n users per window (capacity n instead of n/2)
    runs the pool dry; the decisions Z3 returns reproduce the shortage in an exact run."""
    good = population_setup("lpd", [FixedClass(3, Fraction(1))], [12], 2).config
    bad = PopulationConfig(good.n, good.rule, good.unit, good.recycle, good.n, good.absorb_cap)
    result = check_pool("lpd", bad, (3,), 9, "published", "mutant")
    assert result.status == "counterexample"
    kernel = PopulationKernel("lpd", ExactAlgebra(), bad, "published")
    pool = UserPool(12, bad.recycle, np.random.default_rng(0))
    state = kernel.start()
    with pytest.raises(PoolExhausted):
        for t, decision in enumerate(result.counterexample, start=1):
            pool.release(t)
            draw = kernel.plan(state, t)
            pool.draw(int(draw.dissimilarity))
            publish = not draw.nullified and decision
            if publish:
                pool.draw(int(draw.publication))
            state = kernel.step(state, t, draw, publish)


def test_cli_targets_match_the_proof_registry() -> None:
    from wevent.cli.prove import POPULATION_PROOFS as _POPULATION_PROOFS
    from wevent.proofs.population import POPULATION_TARGETS

    assert tuple(_POPULATION_PROOFS) == POPULATION_TARGETS


def test_population_certificates_are_well_formed() -> None:
    """One certificate per population target and variant; sound ones proved, the published OPS
    family refuted by the split theorem, every one naming its solver, scope and time."""
    import json
    from pathlib import Path

    from wevent.proofs.population import POPULATION_TARGETS

    for target in POPULATION_TARGETS:
        for variant in ("sound", "published"):
            name = target.replace("+", "-plus")
            data = json.loads(
                Path(f"wevent/proofs/certificates/population-{name}-{variant}.json").read_text()
            )
            assert data["mechanism"] == target and data["variant"] == variant
            assert data["solver"].startswith("z3 ") and data["seconds"] >= 0
            ops_family = target == "ops" or "+" in target or target.endswith("-ops")
            expected = "counterexample" if variant == "published" and ops_family else "proved"
            assert data["result"] == expected
            if expected == "counterexample":
                cex = data["theorems"][0]["counterexample"]
                assert (cex["n"], cex["w"], cex["k"], cex["split"]) == (10, 5, 3, 2)


def test_the_pool_theorem_states_the_slots_it_was_proved_for() -> None:
    # Found in review: the pool proof is bounded in slots but its scope left the horizon out.
    fixed = prove_population("lpa", variant="sound", w_max=2, classes=1, horizon=2)
    pool, windows = fixed["theorems"][-2:]
    assert pool["scope"]["horizon"] == 2 and "horizon_max" not in pool["scope"]
    assert "horizon" not in windows["scope"]  # the window theorem is arithmetic, every horizon
    # By default each window tuple gets 3 x its largest window: the least and the most stated.
    default = prove_population("lpa", variant="sound", w_max=2, classes=1)
    scope = default["theorems"][-2]["scope"]
    assert (scope["horizon"], scope["horizon_max"]) == (3, 6) and "3 x" in scope["horizon_rule"]


def test_population_scopes_print_as_words() -> None:
    from wevent.proving import render_population

    lines = render_population(prove_population("lpa", variant="sound", w_max=2, classes=1))
    assert lines[0].startswith("lpa (sound): PROVED for 1 class, windows 1..2, users 2 w_max")
    assert "3..6 slots (3 x the largest window of each window tuple)" in lines[0]
    assert not any("{'" in line for line in lines)  # no dict reprs
