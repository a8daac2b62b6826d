# Two commands for a fresh machine with Python >= 3.11 and make:
#   make lab    create .venv if missing, open JupyterLab on the first lesson
#   make test   create .venv if missing, run unit tests + every lesson (pytest --nbmake)
# TORCH_SPEC picks the torch build installed first, e.g. a CPU-only wheel:
#   make test TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu"
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?=
PYTEST_ARGS ?=

.PHONY: lab test test-browser lint format check-notebooks bench screenshots clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml jupyter/overrides.json | $(BIN)/activate
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(if $(TORCH_SPEC),$(BIN)/python -m pip install --quiet $(TORCH_SPEC))
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python tools/lab_settings.py  # no news prompt, no update check on first start
	touch $@

# as root (containers, cloud boxes) Jupyter refuses to start unless told it is on purpose
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

# opens the first lesson; the file browser on the left lists the others
lab: $(VENV)/.installed
	$(BIN)/jupyter lab notebooks/00_start_here.ipynb $(LAB_ARGS)

test: $(VENV)/.installed
	$(BIN)/pytest --nbmake $(PYTEST_ARGS)

# every lesson run in JupyterLab in headless Chromium (Debian's /usr/bin/chromium)
test-browser: $(VENV)/.installed
	$(BIN)/pytest -m browser tests/browser $(PYTEST_ARGS)

# refresh the README's pictures of lessons 02 and 03
screenshots: $(VENV)/.installed
	ACCUMLAB_SCREENSHOTS=docs/img $(BIN)/pytest -m browser tests/browser -k "02_grad or 03_loss"

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

check-notebooks: $(VENV)/.installed
	$(BIN)/python tools/check_notebooks.py notebooks

# every lesson's time and memory; every explorer's latency (all cores, then pinned to one);
# every lesson again with one core kept busy by another process. Each updates its README table.
bench: $(VENV)/.installed
	$(BIN)/python tools/bench_notebooks.py notebooks --out benchmarks/notebooks.md --readme README.md
	$(BIN)/python benchmarks/widget_latency.py --pinned --out benchmarks/widget_latency.md --readme README.md
	$(BIN)/python benchmarks/busy_core.py --readme README.md --table benchmarks/notebooks_busy_core.md \
		-- $(BIN)/python tools/bench_notebooks.py notebooks --out benchmarks/notebooks_busy_core.md

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
