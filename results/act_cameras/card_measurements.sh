#!/usr/bin/env bash
# The measurements issue 20's card asks of the camera recipe's checkpoint, once `act-lab recipe --out RUN` has
# finished (its act/average/pretrained_model exists; its own eval is 2000-2199, 4 objects, in RUN/eval). Each
# in-process evaluation resumes from its finished episodes (act-sim eval --resume), so after a stop run it again.
#
#   bash results/act_cameras/card_measurements.sh [RUN]        # RUN: outputs/recipe_cam (default)
#
# Writes under RUN/card/:
#   2100_300_4/       300 more unseen 4-object seeds, the seeds of models/act_target_tool (158/300, the same data
#                     without cameras) and models/act_target_tool_yaw (202/300)
#   2000_100_6/       100 seeds with 6 objects
#   replace_N_2000/   the same checkpoint in chunks of N = 30, 10, 1 (no ensembling) on the eval stage's 200 seeds
#   last_2000/        the last checkpoint alone (not averaged), ensembled, on those 200 seeds
#   ros_2000_20/      the ROS graph in lockstep, seeds 2000-2019 (report_ros.json; against the eval stage's first 20)
#   realtime_2000_20/ the graph under clock:=realtime, seeds 2000-2019 (one JSON an episode)
# Times on 2 cores: about 12 s an ensembled episode on one worker (a 43-58 ms tick: bench/bench_camera_act.py).
# Run it alone: beside a training run the graph's policy took 1.1-2.8 s a chunk under realtime (not 40-60 ms) and
# the arm held all 300 ticks of each episode.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${1:-outputs/recipe_cam}
MODEL=$RUN/act/average/pretrained_model
[[ -f $MODEL/config.json ]] || { echo "no $MODEL: run act-lab recipe --out $RUN to its end first" >&2; exit 2; }
LAST=$(ls -d "$RUN"/act/checkpoints/0*/ | tail -1)pretrained_model
OUT=$RUN/card
SIM=.venv/bin/act-sim
eval_() { "$SIM" eval --policy.path "$1" --workers 2 --videos 0 --resume "${@:2}"; }

eval_ "$MODEL" --episodes 300 --first-seed 2100 --objects 4 --out "$OUT/2100_300_4"
eval_ "$MODEL" --episodes 100 --first-seed 2000 --objects 6 --out "$OUT/2000_100_6"
for n in 30 10 1; do
    eval_ "$MODEL" --episodes 200 --first-seed 2000 --objects 4 --merge replace --n-action-steps "$n" \
        --out "$OUT/replace_${n}_2000"
done
eval_ "$LAST" --episodes 200 --first-seed 2000 --objects 4 --out "$OUT/last_2000"
if [[ ! -f $OUT/ros_2000_20/report_ros.json ]]; then
    "$SIM" eval --ros --policy.path "$MODEL" --episodes 20 --first-seed 2000 --objects 4 --videos 0 \
        --out "$OUT/ros_2000_20"
fi
if [[ $(ls "$OUT"/realtime_2000_20/episode*.json 2>/dev/null | wc -l) -lt 20 ]]; then
    rm -rf "$OUT/realtime_2000_20"
    "$SIM" launch clock:=realtime episodes:=20 first_seed:=2000 objects:=4 checkpoint:="$MODEL" \
        video_dir:="$OUT/realtime_2000_20" record_video:=false
fi
echo "done: $OUT"
