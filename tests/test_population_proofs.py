"""The OPS split theorem (proofs/population.py): sound proved, published refuted, and the
counterexample is a real one (its reports fit the window and exceed the split)."""

from __future__ import annotations

from mechanisms.ops import reports_within
from proofs.population import prove_ops_split


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
