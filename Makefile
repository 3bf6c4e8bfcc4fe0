# cua_rl: the two commands of the README, plus the benchmarks.
#   make demo   set up .venv and run the main job on SimDesk
#   make test   set up .venv and run the test suite offline (private network namespace)
#   make bench  set up .venv and run the benchmarks in benchmarks/ (results in benchmarks/results/)
#   make docs   set up .venv and build the documentation site into site/ (mkdocs build --strict;
#               make test runs the same build in tests/test_docs.py)
#   make osworld-eval  build .venv-osworld-eval: OSWorld's desktop-env (its metric functions) in a
#               venv of its own, called across a process boundary (cua_rl/envs/backends/osworld/evaluation)
# Each target creates .venv if missing and installs what it needs; a second run installs nothing.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt
PYTEST_ARGS ?=
# the suite's workers (pytest-xdist): a module per worker, every Ray test on one (tests/conftest.py)
TEST_WORKERS ?= 2

.PHONY: demo test bench docs lint clean-venv osworld-eval

# OSWorld's evaluator (desktop-env) pins torch~=2.5, numpy<2, ...: it never enters .venv. Its
# own venv gets desktop-env without its dependencies plus only what the metric modules we load
# import (cua_rl/envs/backends/osworld/evaluation/requirements.txt, every package pinned, --no-deps so nothing else comes).
# numpy<2 has wheels for Python 3.9-3.12 only: OSWORLD_PYTHON may name such an interpreter.
OSWORLD_PYTHON ?= $(PYTHON)
OSWORLD_VENV   := .venv-osworld-eval
DESKTOP_ENV    := desktop-env==1.0.2
OSWORLD_PIP    := $(OSWORLD_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch + torchvision first, pinned together, so nothing later pulls another torch.
$(VENV)/.torch: constraints.txt | $(BIN)/python
	$(PIP) torch==2.14.1 torchvision==0.29.1
	@touch $@

$(VENV)/.core: pyproject.toml constraints.txt $(VENV)/.torch
	$(PIP) -e .
	@touch $@

$(VENV)/.dev: pyproject.toml constraints.txt $(VENV)/.core
	$(PIP) -e '.[dev,vlm,ray,x11,miniwob,macos,ocr]'
	@touch $@

$(OSWORLD_VENV)/.ready: cua_rl/envs/backends/osworld/evaluation/requirements.txt
	rm -rf $(OSWORLD_VENV)
	$(OSWORLD_PYTHON) -m venv $(OSWORLD_VENV)
	$(OSWORLD_PIP) -r cua_rl/envs/backends/osworld/evaluation/requirements.txt
	$(OSWORLD_PIP) $(DESKTOP_ENV)
	@touch $@

osworld-eval: $(OSWORLD_VENV)/.ready

demo: $(VENV)/.core
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(BIN)/python -m cua_rl.cli demo

# Debian packages of the local desktop (tests/envs/backends/x11): apt-get once, then a stamp (see the script).
$(VENV)/.apt: scripts/apt-deps.sh | $(BIN)/python
	scripts/apt-deps.sh $@

# compileall first: where PYTHONDONTWRITEBYTECODE is set, every process the suite starts would
# compile the package's modules again (~0.3 s of CPU each)
test: $(VENV)/.dev $(VENV)/.apt $(OSWORLD_VENV)/.ready
	$(BIN)/python -m compileall -q -j 0 cua_rl benchmarks scripts >/dev/null
	scripts/offline.sh $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

bench: $(VENV)/.dev
	scripts/offline.sh $(BIN)/python benchmarks/bench_env.py
	scripts/offline.sh $(BIN)/python benchmarks/bench_calibration.py

docs: $(VENV)/.dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(VENV)/.dev
	$(BIN)/ruff check cua_rl tests benchmarks

clean-venv:
	rm -rf $(VENV) $(OSWORLD_VENV)
