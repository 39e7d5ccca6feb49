# The kit's two commands (see README):  make lab   |   make test
#
# Both create .venv on first use and install the kit into it. Override on the command line:
#   SCALE=ci|workshop|full        size of fixtures and sweeps (make lab / make run)
#   TORCH_INDEX=<wheel index URL>  choose your torch build, e.g. a CUDA one (README, "GPU")
#   SYSTEM_TORCH=1                 keep the torch your PYTHON already has (any release in
#                                  pyproject.toml's range): .venv sees its site-packages
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

.PHONY: setup lab run test test-start-methods bench clean-venv

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
# idle 17 % of the run (vmstat), but a fresh-clone run with three lost a notebook kernel at
# its start ("Kernel died before replying to kernel_info"), cause not found yet.
TEST_WORKERS ?= 2
test: setup  ## unit, contract and bad-input tests, then every notebook through nbval at ci scale
	LABKIT_SCALE=ci $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# Every chapter again with multiprocessing's default start method forced to spawn (macOS,
# Windows) and to forkserver (Linux from Python 3.14): tests/startmethod/sitecustomize.py.
# Two notebooks at a time (one at a time these passes took 1,817 s
# of a 2,626 s fresh-clone CI run). The cell timeout (a hang guard, 120 s in pyproject.toml)
# is doubled here: every worker and torchrun rank starts a fresh interpreter that imports
# torch. The session-last test runs after the chapters, as in `make test`: no process and no
# /dev/shm entry left behind. The forkserver pass preloads torch into the fork server
# (LABKIT_FORKSERVER_PRELOAD, see tests/startmethod/sitecustomize.py): its workers are forked
# with torch imported, as a tuned 3.14 setup has them; the spawn pass pays every import.
LEAK_CHECK := tests/test_session_end.py::test_session_leaves_no_process_and_no_shared_memory
START_METHODS ?= spawn forkserver
test-start-methods: setup  ## every chapter under spawn, then forkserver, at ci scale
	@for m in $(START_METHODS); do \
	  echo "--- notebooks with the default start method forced to $$m ---"; \
	  LABKIT_SCALE=ci LABKIT_START_METHOD=$$m LABKIT_FORKSERVER_PRELOAD=torch \
	  PYTHONPATH="$(CURDIR)/tests/startmethod$${PYTHONPATH:+:$$PYTHONPATH}" \
	    $(BIN)/python -m pytest notebooks $(LEAK_CHECK) -n $(TEST_WORKERS) --dist loadfile \
	      -p no:cacheprovider -q --nbval-cell-timeout=240 || exit 1; \
	done

bench: setup
	$(BIN)/labkit bench meter-overhead

clean-venv:
	rm -rf $(VENV)
