# make bench [GPUS=N] [SWEEP=default|seed|best|strategies|smoke] [DATA=dir] [MODEL=name]  run a sweep, print the tables
# make test                                                                     the CPU test suite
# make report [TABLE_LANG=zh]                                                       tables from stored results
# make feed [GPUS=N] [DATA=dir] [FEED_ARGS=--cold]                             can this host feed N GPUs (input side only)
# make recommend [GPUS=N] [BUDGET=10m] [DATA=dir]                               the fastest configuration here, as a script
# make compare A=<commit|run> B=<commit|run> [FAIL_UNDER=5] [FORCE=1] [COMPARE_ARGS=...]  deltas judged against noise
# make ab A=<commit|folder> B=<commit|folder> [AB_SWEEP=amp] [ONLY=patterns] [AB_ARGS=...]  both measured side by side
#
# Uses the current python3 as it is when it already imports what the suite needs (GPU images with
# torch preinstalled); otherwise makes .venv and installs environments/requirements-$(ENV).txt.
PY ?= python3
VENV := .venv
ENV ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo cuda13 || echo cpu)
REQS := environments/requirements-$(ENV).txt
STAMP := $(VENV)/.installed-$(ENV)
# found, not imported: importing torch here cost a fresh H200 machine seconds on every make, before
# anything ran (its image compiles torch's bytecode at each import); a broken install still fails loudly
NEEDS := torch torchvision pandas tabulate pytest pytest_benchmark
READY := $(shell $(PY) -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))" $(NEEDS) >/dev/null 2>&1 && echo yes)
ifeq ($(READY),yes)
PYTHON := $(PY)
SETUP :=
else
PYTHON := $(VENV)/bin/python
SETUP := $(STAMP)
endif

# bytecode cached outside the tree, also where the image forbids writing it (one H200 image sets
# PYTHONDONTWRITEBYTECODE and ships no .pyc: torch then takes 8 s to import instead of 3)
export PYTHONPYCACHEPREFIX ?= $(HOME)/.cache/gpu-bench/pycache
unexport PYTHONDONTWRITEBYTECODE
# once per install, on every core: otherwise each fresh home pays it in the first runs (13.5 s per cold torch
# import here); -qq and "|| true" because some packages ship deliberately invalid .py files (templates, tests)
MAKE_BYTECODE = $(VENV)/bin/python -W ignore -m compileall -qq -j 0 $$($(VENV)/bin/python -c \
  "import sysconfig as s; print(s.get_paths()['stdlib'], s.get_paths()['purelib'])") || true

SWEEP ?= default
GPUS ?=
DATA ?=
MODEL ?=
TABLE_LANG ?= en
BENCH_ARGS ?=

BUDGET ?= 10m

.PHONY: bench test report compare ab env setup recommend feed
bench: $(SETUP)
	$(PYTHON) -m bench sweep $(SWEEP) $(if $(GPUS),--gpus $(GPUS)) $(if $(DATA),--data $(DATA)) $(if $(MODEL),--model $(MODEL)) $(BENCH_ARGS)

# can this host feed GPUS GPUs? its input pipelines alone at 1, 2, 4 ... GPUS ranks (FEED_ARGS: --cold, --per-gpu N)
feed: $(SETUP)
	$(PYTHON) -m bench feed $(if $(GPUS),--gpus $(GPUS)) $(if $(DATA),--data $(DATA)) $(if $(MODEL),--model $(MODEL)) $(FEED_ARGS)

# two test processes where pytest-xdist is installed (environments/requirements-common.txt; a GPU image may
# lack it), each case of theirs training on one thread; tests/conftest.py says which tests share a process
TEST_WORKERS ?= 2
test: $(SETUP)
	$(PYTHON) -m pytest -q tests $$($(PYTHON) -c "import xdist" 2>/dev/null && echo "-n $(TEST_WORKERS)")

recommend: $(SETUP)
	$(PYTHON) -m bench recommend --budget $(BUDGET) $(if $(GPUS),--gpus $(GPUS)) $(if $(DATA),--data $(DATA)) $(BENCH_ARGS)

report: $(SETUP)
	$(PYTHON) -m bench report --lang $(TABLE_LANG)

# make itself exits 2 whenever the command fails; its "Error 1" (regression) or "Error 2" (bad input)
# line carries the command's own exit code
compare: $(SETUP)
	$(PYTHON) -m bench compare $(A) $(B) $(if $(FAIL_UNDER),--fail-under $(FAIL_UNDER)) $(if $(FORCE),--force) $(COMPARE_ARGS)

ab: $(SETUP)
	$(PYTHON) -m bench ab $(A) $(B) $(AB_SWEEP) $(if $(ONLY),--only '$(ONLY)') $(AB_ARGS)

env: $(SETUP)
	$(PYTHON) -m bench env

setup: $(SETUP)

$(STAMP): $(REQS) environments/requirements-common.txt
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --progress-bar on --upgrade pip
	@echo "installing the suite's packages into $(VENV) (about 6 GB the first time; pip shows its progress)"
	$(VENV)/bin/python -m pip install --progress-bar on -r $(REQS)
	@echo "compiling their bytecode into $(PYTHONPYCACHEPREFIX) (the prefix hides the one pip wrote)"
	$(MAKE_BYTECODE)
	touch $@
