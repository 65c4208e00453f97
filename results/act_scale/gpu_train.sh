#!/usr/bin/env bash
# The script that trained results/act_scale's runs on the lent H200 (one call of the device tool, then one resume
# call of the same runs for 200 s more): act_train --device cuda, four runs side by side on one GPU, stopped at a
# deadline; the mean of each run's last 3 checkpoints is tarred into $OUT. Run from the repository root with
#   .whl/   the wheels the GPU machine lacks (lerobot 0.6.1 and its pure-Python needs, av), --no-deps
#   .gpu/data, .gpu/data13, .gpu/data15   the three datasets' data/ and meta/{info,stats,act_node_renderer}.json
# Usage: bash results/act_scale/gpu_train.sh SECONDS   (450 here; the resume ran the same go lines for 200)
set -u
BUDGET=${1:-420}
export PYTHONUNBUFFERED=1 TQDM_MININTERVAL=20
PY=${PY:-python3}; DEV=${DEV:-cuda}; export OMP_NUM_THREADS=${OMP_NUM_THREADS:-3}
[ -n "${SKIP_PIP:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L 2>/dev/null
$PY -c "import torch, act_lab.vision.act_train as t, lerobot.policies.act.modeling_act; print('imports ok', torch.__version__, torch.cuda.is_available())" || exit 1
mkdir -p /tmp/runs
go() { # name dataset batch [extra...]
  local name=$1 data=$2 batch=$3; shift 3
  timeout --signal=INT "$BUDGET" $PY -m act_lab.vision.act_train --device $DEV --no-cameras \
    --dataset "$data" --cache /tmp/none --backbone /tmp/none --out /tmp/runs/$name --steps 400000 \
    --batch-size "$batch" --save-every "$SAVE" "$@" > "$OUT/$name.log" 2>&1 &
}
SAVE=2500 go a13_b8 .gpu/data13 8
SAVE=1000 go b13_b64 .gpu/data13 64
SAVE=1000 go d15_b64 .gpu/data15 64
SAVE=1000 go e10_b64 .gpu/data 64
sleep 60; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv 2>/dev/null
wait
$PY - <<'PY'
import os, tarfile
from pathlib import Path
from act_lab.vision.act_train import average_checkpoints
out = Path(os.environ["OUT"])
for run in sorted(Path("/tmp/runs").iterdir()):
    saved = sorted(p for p in (run / "checkpoints").glob("[0-9]" * 6) if (p / "pretrained_model" / "model.safetensors").is_file())
    print(run.name, "checkpoints:", [p.name for p in saved])
    if len(saved) < 3:
        continue
    avg = average_checkpoints([p / "pretrained_model" for p in saved[-3:]], run / "average" / "pretrained_model")
    with tarfile.open(out / f"{run.name}_{saved[-1].name}.tar", "w") as tar:
        tar.add(avg, arcname=f"{run.name}_{saved[-1].name}")
    if run.name == "b13_b64" and len(saved) >= 9:  # the curve: the same run's mean a third of the way
        third = len(saved) // 3
        mid = average_checkpoints([p / "pretrained_model" for p in saved[third - 3:third]], run / "mid" / "pretrained_model")
        with tarfile.open(out / f"{run.name}_{saved[third - 1].name}.tar", "w") as tar:
            tar.add(mid, arcname=f"{run.name}_{saved[third - 1].name}")
PY
ls -la $OUT
