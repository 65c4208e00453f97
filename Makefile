# The README's two commands: `make demo` (the main job) and `make test`. Both set up .venv first.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test setup lint results models attention

# the shipped ACT (models/act_target_tool_yaw) in the ROS graph, one episode; DEMO_SEED picks the scene (2001: a pen,
# which the yaw read from the cameras lets it pick); at the cameras' 96x128 default, the size its yaw reader reads
DEMO_SEED ?= 2001
demo: setup
	$(VENV)/bin/act-sim launch episodes:=1 first_seed:=$(DEMO_SEED) video_dir:=outputs/graph
	@cat outputs/graph/episode1_seed$(DEMO_SEED).json

test: setup
	$(PY) -m pytest -q

setup:
	@bash scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check act_node tests bench plugins launch

results: setup
	$(VENV)/bin/act-lab attention results

models: setup
	$(VENV)/bin/act-lab attention models

attention: setup
	$(VENV)/bin/act-lab attention demo --out outputs/attention
