#!/bin/bash
# re-serve the walk's trained checkpoint on the simulated arm for 60 s after the first chunk; count the holds
cd "$(dirname "$0")/../.."  # the repository root; S: the walk's folder (results/arm_walk/README.md)
S=/tmp/armwalk
.venv/bin/python -m act_node.arm.servo_sim --calibration $S/follower_truth.json --hand-speed 0 > /tmp/reserve_bus.out 2>/tmp/reserve_bus.err &
BUS=$!
sleep 4
F=$(head -1 /tmp/reserve_bus.out)
echo | .venv/bin/lerobot-calibrate --robot.type=so101_follower --robot.port=$F --robot.id=follower --robot.calibration_dir=$S/cal > /tmp/reserve_cal.log 2>&1
V=$S/takes/videos; CAMS=$V/observation.images.front/chunk-000/file-000.mp4,$V/observation.images.wrist/chunk-000/file-000.mp4
.venv/bin/act-sim launch robot:=so101 port:=$F id:=follower calibration_dir:=$S/cal camera_devices:=$CAMS \
    checkpoint:=$S/train/checkpoints/last/pretrained_model task:="pick up the cup" > /tmp/reserve.log 2>&1 &
L=$!
for i in $(seq 1 120); do grep -q "chunk for\|chunks_applied\|following" /tmp/reserve.log && break; sleep 1; done
sleep 60
kill -INT $L; wait $L; echo "launch exit $?"
kill -TERM $BUS; wait $BUS
echo "holds (chunk stale): $(grep -c 'holding the arm: chunk stale' /tmp/reserve.log)"
