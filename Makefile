# The kit's two commands (see README):  make lab   |   make test
#
# Both create .venv on first use and install the kit into it. Override on the command line:
#   SCALE=ci|workshop|full        size of fixtures and sweeps (make lab / make run)
#   TORCH_INDEX=<wheel index URL>  choose your torch build, e.g. a CUDA one (docs/gpu.md)
#   SYSTEM_TORCH=1                 keep the torch your PYTHON already has (any release from
#                                  2.11; CI tests 2.13.0 and the newest on PyPI, 2.15.0 as of
#                                  2026-12): .venv sees its site-packages
#   PYTHON=python3.12              the interpreter the virtual environment is made from

PYTHON ?= python3
VENV ?= .venv
SCALE ?= workshop
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
SYSTEM_TORCH ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test-gpu setup lab run test test-latest bench clean-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(if $(SYSTEM_TORCH),--system-site-packages) $(VENV)
	@# torch first, so nothing else can pull a multi-GB CUDA build onto a machine without a GPU.
	@# Without nvidia-smi, pip's dry run tells whether the default build would bring CUDA
	@# libraries; if so, PyTorch's CPU index is used instead.
	@if [ -n "$(SYSTEM_TORCH)" ]; then \
	  $(BIN)/python -c "import torch; print('torch: keeping', torch.__version__, 'from', torch.__file__)" || \
	  { echo "SYSTEM_TORCH=1, but $(PYTHON) has no torch: install one in pyproject.toml's range, or leave SYSTEM_TORCH out"; exit 1; }; \
	elif [ -n "$(TORCH_INDEX)" ]; then \
	  echo "torch: $(TORCH_SPEC) from $(TORCH_INDEX)"; \
	  $(BIN)/pip install --index-url "$(TORCH_INDEX)" "$(TORCH_SPEC)"; \
	elif ! command -v nvidia-smi >/dev/null 2>&1 && \
	     $(BIN)/pip install --dry-run --quiet --report - "$(TORCH_SPEC)" 2>/dev/null \
	     | grep -q '"name": "nvidia-'; then \
	  echo "torch: no GPU here, but the default build would bring CUDA: using the CPU index"; \
	  $(BIN)/pip install --index-url "$(TORCH_CPU_INDEX)" "$(TORCH_SPEC)"; \
	else \
	  $(BIN)/pip install "$(TORCH_SPEC)"; \
	fi
	@# torchcodec's build must match torch's (CPU or CUDA 13), which pip cannot see: the
	@# one labkit/media/pairing.py picks goes in first, and the kit's range keeps it.
	$(BIN)/pip install "$$($(BIN)/python labkit/media/pairing.py)"
	$(BIN)/pip install -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

lab: setup  ## the main job: fixtures ready, JupyterLab opened on notebooks/
	$(BIN)/labkit lab --scale $(SCALE)

run: setup  ## the main job headless: every chapter executed, records written
	$(BIN)/labkit run --scale $(SCALE)

# TEST_WORKERS: pytest-xdist processes for `make test`, one file (a notebook, a test module)
# at a time each; tests/test_session_end.py runs alone after all of them (tests/conftest.py).
# 0 runs everything in this one process. Two on a 2-core machine: with two the cores sat
# idle 13-17 % of a run with every chapter under three start methods (vmstat), but three
# gained nothing (fresh clones, same day: 2,186 s with three, 2,197 s with two; each file ran
# about 1.5 times longer) and one test failed under the load. A notebook kernel that dies
# at its start quotes its stderr (notebooks/conftest.py): a run with three once lost one so.
TEST_WORKERS ?= 2
# START_METHODS=macos,forkserver (what CI runs): every chapter once more with
# multiprocessing's default start method forced to spawn (macOS, Windows) and to forkserver
# (Linux from Python 3.14), in the same session (notebooks/conftest.py, --start-methods;
# tests/startmethod/sitecustomize.py). ``macos`` is spawn with the Linux-only facilities
# hidden (labkit/facilities.py: posix_fadvise, PSS, /proc, RLIMIT_DATA, affinity, /dev/shm),
# so every chapter shows it reaches its end on a Mac; ``spawn`` alone keeps them. The fork server preloads torch, as a tuned 3.14 setup
# has it; spawn workers pay every import. The cell timeout (a hang guard, 120 s in
# pyproject.toml) is doubled then: every spawn worker and torchrun rank imports torch afresh.
START_METHODS ?=
test: setup  ## unit, contract and bad-input tests, then every notebook through nbval at ci scale
	LABKIT_SCALE=ci $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile \
	  $(if $(START_METHODS),--start-methods=$(START_METHODS) --nbval-cell-timeout=240)

# test-latest: the kit beside the newest torch on PyPI (issue 44), in $(LATEST_VENV):
# .ci/setup-latest installs that torch (a CUDA build; it runs on the CPU), the torchcodec
# that goes with it and the kit, and fails if pip would replace that torch. Then the unit
# tests and every chapter at ci scale under this machine's start method, on that torch
# (LABKIT_EXPECT_TORCH: the session refuses to start on another), a DeprecationWarning at a
# labkit call an error (pyproject.toml's filterwarnings, as in `make test`). `.ci/run` runs it
# with LATEST_TESTS narrowed to what fits CI's time.
# LATEST_EXTRAS=1 adds the chapters' optional rows (.ci/install-extras: tf.data, Lance,
# chapter 14's object-store systems), which the whole set needs under CI=true.
LATEST_VENV ?= .venv-latest
LATEST_TESTS ?= tests notebooks
LATEST_EXTRAS ?= 1
# LATEST_SETUP=0: $(LATEST_VENV) is already set up (.ci/run did it as a step of its own)
LATEST_SETUP ?= 1
test-latest:  ## unit tests and every chapter beside the newest torch on PyPI
	$(if $(filter 1,$(LATEST_SETUP)),bash .ci/setup-latest $(LATEST_VENV))
	$(if $(filter 1,$(LATEST_EXTRAS)),PIP_CONSTRAINT=/dev/null bash .ci/install-extras $(LATEST_VENV))
	LABKIT_SCALE=ci LABKIT_EXPECT_TORCH=$$(cat $(LATEST_VENV)/.torch) \
	  $(LATEST_VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(LATEST_TESTS)

# test-gpu: on a CUDA machine, the GPU tests (a GPU path that cannot run beside the GPU
# fails) and `labkit bench gpu`, whose figures go to reference/<GPU name> (.ci/test-gpu).
# No setup: it uses the torch the machine has. Without a GPU it says so in one line.
test-gpu:  ## on a CUDA GPU: every GPU path checked, the GPU figures recorded under reference/
	bash .ci/test-gpu

bench: setup  ## every named benchmark at ci scale, figures as JSON (CI does not run them)
	for name in $$($(BIN)/labkit bench --list | cut -d' ' -f1); do \
	  LABKIT_SCALE=ci $(BIN)/labkit bench $$name --json || exit 1; done

clean-venv:
	rm -rf $(VENV)
