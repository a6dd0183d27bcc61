# Every target does its own set-up: a fresh clone needs nothing installed beforehand.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SHARED ?= ../shared

.PHONY: demo test lint typecheck deps-check node-check unit bench conformance proptest clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m actors.frontends.demo

test: $(STAMP) lint typecheck deps-check unit

lint: $(STAMP)
	$(BIN)/ruff check bus actors tests

typecheck: $(STAMP)
	$(BIN)/mypy

deps-check: $(STAMP)
	$(BIN)/python tests/check_dependencies.py

unit: $(STAMP) node-check
	$(BIN)/pytest -q -p no:cacheprovider

# With ../shared present, the hooks corpus tests run Gemini CLI's Node hook scripts:
# without node they would skip quietly, so say it and stop instead.
node-check:
	@if [ -d $(SHARED)/conformance ] && ! command -v node >/dev/null; then \
	  echo "make test: node is not on PATH, and the hooks corpus tests in $(SHARED)/conformance run Node hook scripts (Debian: apt-get install nodejs)" >&2; exit 1; fi

# The property tests only (marker `property`: every test hypothesis drives, and the
# explorer's), EXAMPLES examples each (the proptest profile of tests/conftest.py: 4 to 9
# minutes on 2 busy cores; EXAMPLES=10000 is the deep profile's count); hypothesis reports
# the examples run and the time of each property.
EXAMPLES ?= 250
proptest: $(STAMP)
	HYPOTHESIS_PROFILE=proptest HYPOTHESIS_EXAMPLES=$(EXAMPLES) $(BIN)/pytest -q -p no:cacheprovider -m property --hypothesis-show-statistics --durations=0 tests $(ARGS)

# PROFILE=soak: only the soak benchmarks (a busy daemon over minutes; tests/bench/bench_soak.py).
GEMINI_CLI ?= /tmp/gemini-cli/node_modules/.bin
bench: $(STAMP)
	PATH="$(GEMINI_CLI):$$PATH" $(BIN)/python -m tests.bench $(if $(PROFILE),--profile $(PROFILE))

# Exit 0 when exactly the differences listed in tests/conformance/expected.py differ.
conformance: $(STAMP)
	@if [ -d $(SHARED)/conformance ]; then \
	  $(BIN)/python -m tests.conformance.run $(SHARED)/conformance/compare.py \
	    --impl $(abspath $(BIN))/agentbus -j 2 $(ARGS); \
	else echo "$(SHARED)/conformance not found: skipping conformance"; fi

clean:
	rm -rf $(VENV) build *.egg-info
