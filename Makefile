# The README's two commands: `make demo` (the main job) and `make test`. Both set up .venv first.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test setup lint results models attention

# the shipped ACT (models/act_target_tool_yaw_grasp) in the ROS graph, one episode, headless; DEMO_SEED picks the
# scene (2021: a pen among a ball, a cube and a key, which the yaw read from the cameras lets it pick). The cameras stay at the 96x128 its yaw reader
# reads; the film draws each at least 480 pixels wide: outputs/demo/episode1_seed$(DEMO_SEED).mp4 and .png
DEMO_SEED ?= 2021
demo: setup
	$(VENV)/bin/act-sim launch episodes:=1 first_seed:=$(DEMO_SEED) video_dir:=outputs/demo
	@cat outputs/demo/episode1_seed$(DEMO_SEED).json
	@echo "video: outputs/demo/episode1_seed$(DEMO_SEED).mp4  picture: outputs/demo/episode1_seed$(DEMO_SEED).png"

test: setup
	$(PY) -m pytest -q

setup:
	@bash scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check act_node act_lab tests bench plugins launch results

results: setup
	$(VENV)/bin/act-lab attention results

models: setup
	$(VENV)/bin/act-lab attention models

attention: setup
	$(VENV)/bin/act-lab attention demo --out outputs/attention
