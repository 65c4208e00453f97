# The README's two commands: `make demo` (the main job) and `make test`. Both set up .venv first.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test setup lint results models

demo: setup
	$(VENV)/bin/act-attention demo --out outputs/attention
	$(VENV)/bin/act-sim video --seed 0 --out outputs/expert_seed0.mp4

test: setup
	$(PY) -m pytest -q

setup:
	@bash scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check act_node tests bench

results: setup
	$(VENV)/bin/act-attention results

models: setup
	$(VENV)/bin/act-attention models
