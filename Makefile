# wevent: `make test` (install + pytest + mypy --strict + ruff), `make demo` (the main job).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: test demo lint typecheck unit slow bench bench-scale clean browser

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check pip==26.3
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $(STAMP)

# Headless Chromium renders the HTML audit report in a test (Debian's package; installed when
# absent, and the test skips with its reason if that is impossible).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	  || echo "warning: could not install chromium; the HTML rendering test will skip" >&2; }

# Tests run on every core (pytest-xdist): the proofs dominate and are independent.
unit: $(STAMP) browser
	$(PY) -m pytest -q -n auto --durations=12

slow: $(STAMP)
	$(PY) -m pytest -q -m slow

typecheck: $(STAMP)
	$(PY) -m mypy --strict accounting mechanisms verifier proofs wevent experiments tests benchmarks

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: unit typecheck lint

demo: $(STAMP)
	$(VENV)/bin/wevent demo

bench: $(STAMP)
	$(PY) benchmarks/bench_accounting.py
	$(PY) benchmarks/bench_oracles.py
	$(PY) benchmarks/bench_allocators.py
	$(PY) benchmarks/bench_local.py
	$(PY) benchmarks/bench_proofs.py
	$(PY) benchmarks/bench_exsub.py
	$(PY) benchmarks/bench_audit.py
	$(PY) benchmarks/bench_gate.py

# Scale: per-slot time and peak memory per allocator family, guard on and off (docs/performance.md).
bench-scale: $(STAMP)
	$(PY) benchmarks/bench_scale.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
