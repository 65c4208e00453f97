#!/usr/bin/env bash
# The reference table of docs/evaluation.md: the shipped checkpoints and the scripted expert on every benchmark
# suite (act_node/suites.py, version 1). Run from the repository root after `make setup`:
#   nice -n 10 bash results/suites/run.sh
# Each checkpoint's reports go to outputs/suites/<checkpoint>/<suite>/ (report.json, report.png, episodes.jsonl);
# report.json and report.png are copied here, and table.py writes table.md from them.
set -euo pipefail
B=.venv/bin
SUITES="pick-4 pick-6 pens-and-keys cluttered"
CHECKPOINTS="${CHECKPOINTS:-act_target_tool_yaw_small act_target_tool_yaw act_target_tool act_image_less_avg act_pick}"
for s in $SUITES; do
  mkdir -p results/suites/expert
  [ -f results/suites/expert/$s.json ] || \
    $B/act-lab expert --suite $s --workers 2 --out results/suites/expert/$s.json > /dev/null
done
for c in $CHECKPOINTS; do
  for s in $SUITES; do
    out=outputs/suites/$c/$s
    [ -f results/suites/$c/$s.json ] && continue
    $B/act-sim eval --policy.path models/$c --suite $s --workers 2 --videos 0 --out $out --resume
    mkdir -p results/suites/$c
    cp $out/report.json results/suites/$c/$s.json
    cp $out/report.png results/suites/$c/$s.png
  done
done
$B/python results/suites/table.py > results/suites/table.md
cat results/suites/table.md
