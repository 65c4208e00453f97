#!/usr/bin/env bash
# The scene reader's study (issue 48): train it, measure it, and the shipped policy with scene:=cameras against
# scene:=sim on the same seeds. From the repository root after `make setup`:
#   nice -n 5 bash results/scene_reader/run.sh
# Every stage skips what is already on disk (the frames' shards, the training's checkpoint, each report).
set -euo pipefail
B=.venv/bin
RUN=${RUN:-outputs/scene_reader}
# 1. frames (about 8 min on 2 cores) and the reader (6,000 steps of batch 32, bf16, resumable: about 55 min)
$B/python -m act_lab.vision.scene_frames --out $RUN/frames --frames 40000 --val-frames 2000
$B/python -m act_lab.vision.scene_train --frames $RUN/frames --out $RUN/run --steps 6000 --batch 32 --threads 1
# (models/scene_reader is $RUN/run/reader, copied)
R=${READER:-models/scene_reader}
# 2. the reader on the evaluation's own scenes, and on held-out appearances and camera poses
out=results/scene_reader
[ -f $out/pick4.json ] || $B/python -m act_lab.vision.scene_eval --reader $R --seeds 2000:2300 --objects 4 \
  --pictures 5 --timing --out $out/pick4.json > /dev/null
[ -f $out/pick6.json ] || $B/python -m act_lab.vision.scene_eval --reader $R --seeds 2000:2100 --objects 6 \
  --out $out/pick6.json > /dev/null
for split in val plain shifted; do
  [ -f $out/frames_$split.json ] || $B/python -m act_lab.vision.scene_eval --reader $R \
    --shards $RUN/frames/${split}_*.npz --out $out/frames_$split.json > /dev/null
done
# 3. the shipped policy, the same seeds, the selector's objects from the truth and from the cameras
for scene in sim cameras; do
  for objects in 4 6; do
    episodes=$([ $objects = 4 ] && echo 300 || echo 100)
    o=outputs/scene_reader/eval_${scene}_$objects
    [ -f $out/eval_${scene}_$objects.json ] && continue
    $B/act-sim eval --policy.path models/act_target_tool_yaw --scene $scene --objects $objects \
      --episodes $episodes --first-seed 2000 --videos 0 --out $o --resume
    cp $o/report.json $out/eval_${scene}_$objects.json
  done
done
for objects in 4 6; do
  $B/act-sim compare outputs/scene_reader/eval_sim_$objects outputs/scene_reader/eval_cameras_$objects \
    --out outputs/scene_reader/compare_$objects > /dev/null
  cp outputs/scene_reader/compare_$objects/compare.json $out/compare_$objects.json
done
