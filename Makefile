# The README's two commands: `make demo` (the main job) and `make test`. Both set up .venv first.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test setup lint results models attention

# the shipped ACT (models/act_target_tool) in the ROS graph, one episode; DEMO_SEED picks the scene
DEMO_SEED ?= 2000
demo: setup
	$(VENV)/bin/act-sim launch episodes:=1 first_seed:=$(DEMO_SEED) image_height:=240 image_width:=320 video_dir:=outputs/graph
	@cat outputs/graph/episode1_seed$(DEMO_SEED).json

test: setup
	$(PY) -m pytest -q

setup:
	@bash scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check act_node tests bench plugins launch

results: setup
	$(VENV)/bin/act-attention results

models: setup
	$(VENV)/bin/act-attention models

attention: setup
	$(VENV)/bin/act-attention demo --out outputs/attention
