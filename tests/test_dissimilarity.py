import numpy as np
import pytest

from wevent.accounting.budget import Budget, BudgetError
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.mechanisms.dissimilarity import dc_dissimilarity, ldp_dissimilarity
from wevent.mechanisms.oracles import GRR
from wevent.verifier.check import check
from wevent.verifier.guard import Guard


def test_ldp_dissimilarity_is_unbiased_for_the_true_mean_squared_difference() -> None:
    rng = np.random.default_rng(8)
    d, n = 4, 4000
    grr = GRR.for_budget(d, Budget(1))
    f = np.array([0.4, 0.3, 0.2, 0.1])
    last = np.array([0.25, 0.25, 0.25, 0.25])
    counts = (f * n).astype(np.int64)
    truth = float(np.mean((f - last) ** 2))
    reps = 2000
    dis = np.array(
        [
            ldp_dissimilarity(
                grr.estimate(grr.perturb_counts(counts, rng), n), last, grr.variance(n, f)
            )
            for _ in range(reps)
        ]
    )
    assert abs(dis.mean() - truth) < 5 * dis.std(ddof=1) / np.sqrt(reps)
    with pytest.raises(ValueError):
        ldp_dissimilarity([0.1], [0.1, 0.2], 0.0)


def test_dc_charges_every_class_and_returns_the_obs_threshold() -> None:
    pop = Population.from_classes(
        {Fixed(2, Budget("0.1")): 2, Fixed(2, Budget("0.4")): 5, Fixed(2, Budget("0.8")): 3}
    )
    guard = Guard(pop)
    groups = {}
    for cls in pop.classes:
        guard.define_group(cls.name, cls.members)
        assert isinstance(cls.requirement, Fixed)
        groups[cls.requirement.eps] = cls.name
    counts = {
        Budget("0.1"): np.array([1, 1]),
        Budget("0.4"): np.array([3, 2]),
        Budget("0.8"): np.array([2, 1]),
    }
    dis, theta = dc_dissimilarity(
        guard, 1, counts, groups, np.array([5.0, 5.0]), np.random.default_rng(0)
    )
    assert theta == Budget("0.4")
    assert np.isfinite(dis)
    verdict = check(guard.ledger, pop)
    assert verdict.ok and len(guard.ledger) == 3


def test_dc_noise_and_shape_checks() -> None:
    # All users above the threshold: dis is the true mean absolute difference plus Laplace
    # noise of scale 1/(d eps_opt), so its variance is 2 / (d eps_opt)^2.
    pop = Population.from_classes({Fixed(10**6, Budget(10**4)): 1})
    guard = Guard(pop)
    guard.define_group("all", pop.classes[0].members)
    rng = np.random.default_rng(12)
    counts = {Budget("0.5"): np.array([3, 1, 0, 0])}
    last = np.array([1.0, 1.0, 1.0, 1.0])
    reps = 4000
    dis = np.array(
        [
            dc_dissimilarity(guard, 1, counts, {Budget("0.5"): "all"}, last, rng)[0]
            for _ in range(reps)
        ]
    )
    var = 2 / (4 * 0.5) ** 2
    assert abs(dis.mean() - 1.0) < 5 * np.sqrt(var / reps)  # mean |c - r| = (2+0+1+1)/4
    assert abs(dis.var(ddof=1) - var) < 5 * np.sqrt(5 * var**2 / reps)
    with pytest.raises(BudgetError, match="both have 4 values"):
        dc_dissimilarity(
            guard, 1, {Budget("0.5"): np.array([4])}, {Budget("0.5"): "all"}, last, rng
        )
    with pytest.raises(BudgetError, match="same classes"):
        dc_dissimilarity(guard, 1, counts, {}, last, rng)
