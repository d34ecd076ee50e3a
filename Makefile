# `make run`: the main job on the bundled data.  `make test`: the test suite.
# Both create or refresh .venv first (only when pyproject.toml changed).
PYTHON ?= python3
VENV ?= .venv
# The CPU wheel of torch held on the lab machines; an unpinned torch pulls a
# multi-GB CUDA build.  Override with e.g. `make TORCH_SPEC=torch test`.
TORCH_SPEC ?= torch==2.13.0
# The test extras and the Slurm and Ray launchers, so that the suite tests them.
EXTRAS ?= test,slurm,ray
STAMP := $(VENV)/.installed-stamp

.PHONY: run test venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)" -e ".[$(EXTRAS)]" 2>&1 \
		| grep -v "is ignored: it is neither a file nor a directory" || true
	$(VENV)/bin/python -c "import gittinseval, torch, botorch, hydra, wandb"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/gittinseval -m experiment=main

test: $(STAMP)
	$(VENV)/bin/python -m pytest

clean:
	rm -rf $(VENV) outputs
