# cua_rl: the two commands of the README, plus the benchmarks.
#   make demo   set up .venv and run the main job on SimDesk
#   make test   set up .venv and run the test suite offline (private network namespace)
#   make bench  set up .venv and run the benchmarks in benchmarks/ (results in benchmarks/results/)
# Each target creates .venv if missing and installs what it needs; a second run installs nothing.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt
PYTEST_ARGS ?=

.PHONY: demo test bench lint clean-venv

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
	$(PIP) -e '.[dev,vlm,ray,x11]'
	@touch $@

demo: $(VENV)/.core
	HF_HUB_OFFLINE=1 WANDB_MODE=offline $(BIN)/python -m cua_rl.cli demo

# Debian packages of the local desktop (tests/desktop): apt-get once, then a stamp (see the script).
$(VENV)/.apt: scripts/apt-deps.sh | $(BIN)/python
	scripts/apt-deps.sh $@

test: $(VENV)/.dev $(VENV)/.apt
	scripts/offline.sh $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.dev
	scripts/offline.sh $(BIN)/python benchmarks/bench_env.py
	scripts/offline.sh $(BIN)/python benchmarks/bench_calibration.py

lint: $(VENV)/.dev
	$(BIN)/ruff check cua_rl tests benchmarks

clean-venv:
	rm -rf $(VENV)
