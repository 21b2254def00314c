# make derive  -- regenerate formulas/ (creates .venv with the package if missing)
# make test    -- prove every identity, run the test suite (two pytest-xdist workers) and validate the ledgers against PyTorch side by side
# make check   -- prove every identity and check every claim (python -m derive.check, then --claims)
# make validate -- the ledgers against PyTorch and transformers (two at once; make test runs them beside pytest)
# make bench   -- print timings against a bare SymPy import
# make fuzz    -- the fuzz harness ten times over (DERIVE_FUZZ_SCALE=10; make test runs it once)
PYTHON ?= python3
# Python's default: modules compiled once to __pycache__ and read back. A machine that sets
# PYTHONDONTWRITEBYTECODE (some sandboxes and CI runners do) would make every process of the suite, and every
# CLI run a test starts, compile derive's modules anew.
unexport PYTHONDONTWRITEBYTECODE
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: derive test check compiled suite bench fuzz clean renderers validate validate-ledgers validate-hf

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

# One pip run for the package and both extras (a bare clone's make test): the editable build and the
# resolution happen once, not once for the package and again for the extras. --no-compile: pip would
# byte-compile every module of torch, transformers and SymPy one by one (43 s of a 50 s install here,
# 16 s without); make test's `compiled` compiles the ones the suite imports instead, once, beside the proofs.
$(VENV)/.installed-test: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -e '.[test,validate]'
	touch $(VENV)/.installed $@

# KaTeX for formulas/index.html: the version pinned in tests/katex/package-lock.json.
KATEX := tests/katex/node_modules/katex/package.json

$(KATEX): tests/katex/package-lock.json
	cd tests/katex && npm ci --no-audit --no-fund
	touch $@

derive: $(VENV)/.installed $(KATEX)
	$(PY) -m derive.render

renderers:
	bash tests/install_renderers.sh

# One thread in torch's CPU pool (OMP_NUM_THREADS) for the runs that measure with torch: their tensors
# are tiny (tens of elements a side), where a pool only spins, and make test already runs four processes
# on two cores (derive.validate --hf: 20 s of CPU with the default pool, 13 s with one thread; the
# figures it measures are counts, the same either way). derive uses no numpy BLAS.
test suite validate validate-ledgers validate-hf: export OMP_NUM_THREADS := 1

# The proofs and the imports' compilation first, side by side (-j 2); then pytest and the two validations
# side by side (-j 3): the validations fill the cores pytest's workers leave idle (a worker waiting on
# another's render, the last tests of a run); each prints when it is done.
test: renderers $(VENV)/.installed-test
	$(MAKE) --no-print-directory -j 2 --output-sync=target check compiled
	$(MAKE) --no-print-directory -j 3 --output-sync=target suite validate-ledgers validate-hf

check: $(VENV)/.installed
	$(PY) -m derive.check
	$(PY) -m derive.check --claims

# The packages the suite's processes import, imported once so that Python writes their byte code (pip
# installed them uncompiled): otherwise pytest's three processes and the two validations, started
# together, would each compile torch and SymPy again.
compiled: $(VENV)/.installed-test
	$(PY) -c "import torch, transformers, transformers.models.auto.modeling_auto, numpy, sympy, jinja2, pytest, xdist, hypothesis, selenium.webdriver"

suite: $(VENV)/.installed-test
	$(PY) -m pytest -q -n 2 --dist loadgroup

# The two validations run side by side (one core each); each prints its table when it is done.
validate: validate-ledgers validate-hf

validate-ledgers: $(VENV)/.installed-test
	$(PY) -m derive.validate

validate-hf: $(VENV)/.installed-test
	$(PY) -m derive.validate --hf

fuzz: renderers $(VENV)/.installed-test
	DERIVE_FUZZ_SCALE=10 $(PY) -m pytest -q tests/test_fuzz.py

bench: $(VENV)/.installed
	$(PY) bench/run.py

clean:
	rm -rf $(VENV)
