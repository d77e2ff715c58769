# wevent: `make test` (install + pytest + mypy --strict + ruff), `make demo` (the main job).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: test demo lint typecheck unit slow bench bench-scale clean browser check-fresh

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

# Two pytest processes side by side: the Spark tests serially in one process of their own (one
# JVM with the engine's memory plan, whatever else runs), and the rest on every core
# (pytest-xdist; the proofs dominate and are independent). Heavy tests start first. The Spark
# log is printed when both are done; either failing fails the target.
SPARK_LOG := $(VENV)/spark-tests.log
unit: $(STAMP) browser
	@$(PY) -m pytest -q -p no:cacheprovider -m 'spark and not slow' --durations=5 \
	    >$(SPARK_LOG) 2>&1 </dev/null & spark=$$!; \
	$(PY) -m pytest -q -n auto -m 'not spark and not slow' --durations=15; rest=$$?; \
	wait $$spark; spark_rc=$$?; \
	echo "---- Spark tests (their own process) ----"; cat $(SPARK_LOG); \
	test $$rest -eq 0 && test $$spark_rc -eq 0

slow: $(STAMP)
	$(PY) -m pytest -q -m slow

typecheck: $(STAMP)
	$(PY) -m mypy --strict wevent tests benchmarks analysis

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
	$(PY) benchmarks/bench_research_speed.py --breakdown --sweep 10

# Scale: per-slot time and peak memory per allocator family, guard on and off (docs/performance.md).
bench-scale: $(STAMP)
	$(PY) benchmarks/bench_scale.py

# What CI does, from scratch: a new clone of HEAD in a temporary directory, `make demo` and
# `make test` there (RUNS=3 for three in a row; COLD=1 without the pip cache).
check-fresh:
	benchmarks/check_fresh.sh --runs $(or $(RUNS),1) $(if $(COLD),--cold-pip)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
