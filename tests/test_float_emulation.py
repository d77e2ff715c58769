"""``--arithmetic float``: the kernel runs in IEEE doubles end to end and the
guard checks the exact value of every double spent."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.cli import cli
from wevent.mechanisms.allocators.algebra import FloatCountAlgebra

F = Fraction
DOUBLES = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False).filter(
    lambda x: x == 0 or abs(x) > 1e-300
)


@settings(max_examples=300, deadline=None)
@given(DOUBLES, DOUBLES, st.integers(1, 64))
def test_every_operation_is_the_double_operation(a: float, b: float, n: int) -> None:
    alg = FloatCountAlgebra()
    x, y = F(a), F(b)
    assert alg.add(x, y) == F(a + b)
    assert alg.sub(x, y) == F(a - b)
    assert alg.mul(x, y) == F(a * b)
    assert alg.scale(x, F(1, n)) == F(a / n)  # published code divides: eps / (2 * w)
    assert alg.le(x, y) == (a <= b)
    if b != 0:
        assert alg.ratio(x, y) == F(a / b)


def test_budgets_enter_as_the_double_a_parser_reads() -> None:
    alg = FloatCountAlgebra()
    assert alg.add(F(7, 10), F(0)) == F(0.7) != F(7, 10)
    assert alg.const(F(1, 3)) == F(1 / 3)


HETEROGENEOUS = "user,w,epsilon\na,4,0.7\nb,2,1\n"


def test_trace_prove_and_gate_refute_pba_in_doubles(tmp_path: Path) -> None:
    req = tmp_path / "het.csv"
    req.write_text(HETEROGENEOUS)
    runner = CliRunner()
    decisions = "0,0,1,0,1,0,1,0,1,1"
    traced = runner.invoke(
        cli, ["trace", "pba", "-r", str(req), "--decisions", decisions, "--arithmetic", "float"]
    )
    assert traced.exit_code == 1, traced.output
    assert "slot 10" in traced.output and "[7, 10]" in traced.output
    exact = runner.invoke(cli, ["trace", "pba", "-r", str(req), "--decisions", decisions])
    assert exact.exit_code == 0, exact.output
    proved = runner.invoke(cli, ["prove", "allocator", "pba", "--arithmetic", "float"])
    assert proved.exit_code == 1 and "REFUTED" in proved.output
    gated = runner.invoke(cli, ["gate", "pba", "--arithmetic", "float", "--search-runs", "20"])
    assert gated.exit_code == 1 and "REFUTED" in gated.output
