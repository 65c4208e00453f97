"""The scene reader on the evaluation's own scenes: what `act-sim eval --scene cameras` reads at each episode's start.

For each seed, the table-top PickObjectEnv builds for that seed (so the scenes are the episodes' own), the front
camera drawn as the env draws it for the reader, read, and compared with the simulator's truth:
  place     the distance on the table between a reported kind and where it stands (median, p95), by kind
  missed    a kind on the table the reader did not report; phantom: a kind reported that is not on the table
  confused  a phantom reported within CONFUSED_M of another kind that is on the table (one kind read as another)
  selector  the selector on the perceived tokens: found for the requested kind, absent for each kind not there
  time      reading one frame on 1 and 2 threads
and a picture of a few scenes: the image with what the reader saw, and the table from above (truth and reading).

    python -m act_lab.vision.scene_eval --reader models/scene_reader --seeds 2000:2300 --objects 4 \\
        --out results/scene_reader/pick4.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from act_lab.vision.scene_train import distance_summary
from act_node.perception.scene import TURNS, CameraCalibration, SceneReader

CONFUSED_M = 0.03


def parse_seeds(text: str) -> list[int]:
    first, _, last = text.partition(":")
    return list(range(int(first), int(last))) if last else [int(first)]


def evaluate(reader: SceneReader, seeds: list[int], objects: int, pictures: int = 0) -> tuple[dict, list]:
    from act_node.table_frame import KIND_NAMES
    from act_node.tabletop.env import PickObjectEnv

    env = PickObjectEnv(objects=objects, cameras=("front",), target_source="selector", scene="cameras",
                        scene_reader=reader)
    selector = env.selector
    place, by_kind, yaw_err = [], {k: [] for k in KIND_NAMES}, []
    counts = {"scenes": 0, "objects": 0, "missed": 0, "phantoms": 0, "scenes_with_phantom": 0, "confused": 0,
              "request_found": 0, "request_found_near": 0, "absent_asked": 0, "absent_said": 0}
    confusions: dict[str, int] = {}
    shown = []
    for seed in tqdm(seeds, desc=f"scene reader, {objects} objects", unit="scene"):
        env.reset(seed=seed)
        truth = {o.kind: o for o in env.table.task.object_states()}
        seen = {o.kind: o for o in env.seen}
        counts["scenes"] += 1
        counts["objects"] += len(truth)
        counts["missed"] += sum(kind not in seen for kind in truth)
        phantoms = [kind for kind in seen if kind not in truth]
        counts["phantoms"] += len(phantoms)
        counts["scenes_with_phantom"] += bool(phantoms)
        for kind in phantoms:
            o = seen[kind]
            near = [k for k, t in truth.items() if math.hypot(o.x - t.position[0], o.y - t.position[1]) < CONFUSED_M]
            if near:
                counts["confused"] += 1
                key = f"{near[0]} read as {kind}"
                confusions[key] = confusions.get(key, 0) + 1
        for kind, o in seen.items():
            if kind in truth:
                t = truth[kind]
                error = math.hypot(o.x - t.position[0], o.y - t.position[1])
                place.append(error)
                by_kind[kind].append(error)
                if TURNS[kind]:
                    period = 2 * math.pi / TURNS[kind]
                    d = (o.yaw - t.yaw) % period
                    yaw_err.append(math.degrees(min(d, period - d)))
        tokens = [(o.kind, o.x, o.y) for o in env.seen]
        if env.target.selector_found:
            counts["request_found"] += 1
            counts["request_found_near"] += env.target.error_m < 0.01
        for kind in KIND_NAMES:
            if kind not in truth:
                counts["absent_asked"] += 1
                counts["absent_said"] += not selector.select(tokens, kind).found
        if len(shown) < pictures:
            image = env.scene_rig.render(tiny=True)[reader.config.camera]
            shown.append({"seed": seed, "image": image, "truth": truth, "seen": env.seen,
                          "request": env.scene.request})
    env.close()

    n = counts["scenes"]
    report = {"objects": objects, "seeds": [seeds[0], seeds[-1]], **counts,
              "place": distance_summary(place), "place_by_kind": {k: distance_summary(v) for k, v in by_kind.items()},
              "yaw_deg": {"median": round(float(np.median(yaw_err)), 2),
                          "p95": round(float(np.percentile(yaw_err, 95)), 2), "n": len(yaw_err)} if yaw_err else None,
              "phantom_free_share": round(1 - counts["scenes_with_phantom"] / n, 4),
              "missed_share": round(counts["missed"] / counts["objects"], 4),
              "request_found_share": round(counts["request_found"] / n, 4),
              "absent_said_share": round(counts["absent_said"] / max(counts["absent_asked"], 1), 4),
              "confusions": confusions}
    return report, shown


def reading_time(reader: SceneReader, frames: int = 200) -> dict:
    """Seconds to read one frame (the network and the decoding), on 1 and 2 torch threads."""
    import torch

    calibration = CameraCalibration.of_sim(*reader.config.image_size)
    image = np.random.default_rng(0).integers(0, 255, (*reader.config.image_size, 3), dtype=np.uint8)
    times = {}
    before = torch.get_num_threads()
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for _ in range(10):
            reader.read(image, calibration)
        started = time.perf_counter()
        for _ in range(frames):
            reader.read(image, calibration)
        times[f"threads_{threads}_ms"] = round(1000 * (time.perf_counter() - started) / frames, 2)
    torch.set_num_threads(before)
    return times


def picture(shown: list, path: Path) -> None:
    """Each scene: the front image with the reading drawn (a ring per kind, its name), and the table from above
    (truth: grey squares; reading: coloured rings)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(shown), figsize=(3.4 * len(shown), 6.0), squeeze=False)
    for column, scene in enumerate(shown):
        top, bottom = axes[0, column], axes[1, column]
        top.imshow(scene["image"], extent=(0, scene["image"].shape[1], scene["image"].shape[0], 0))
        for o in scene["seen"]:
            top.add_patch(plt.Circle((o.u, o.v), 4, fill=False, color="cyan", lw=1.2))
            top.text(o.u + 4, o.v - 4, f"{o.kind} {o.score:.2f}", color="cyan", fontsize=7)
        top.set_title(f"seed {scene['seed']}: {scene['request']}", fontsize=9)
        top.axis("off")
        for kind, t in scene["truth"].items():
            bottom.plot(t.position[0], t.position[1], "s", color="0.5", ms=7)
            bottom.text(t.position[0] + 0.01, t.position[1] - 0.02, kind, fontsize=7, color="0.3")
        for o in scene["seen"]:
            bottom.plot(o.x, o.y, "o", mfc="none", color="tab:cyan", ms=10, mew=1.5)
        bottom.set_xlim(0.75, 0.25)  # as the front camera looks from y = 0.52: x to the left, the far side up
        bottom.set_ylim(0.45, 0.0)
        bottom.set_xlabel("x (m)", fontsize=7)
        bottom.set_ylabel("y (m)", fontsize=7)
        bottom.set_aspect("equal")
        bottom.set_title("the table as the camera faces it: truth ■, read ○", fontsize=8)
        bottom.tick_params(labelsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reader", default=None, help="the reader's folder (default: models/scene_reader)")
    parser.add_argument("--seeds", default="2000:2300", help="FIRST:END (end excluded)")
    parser.add_argument("--objects", type=int, default=4)
    parser.add_argument("--pictures", type=int, default=0, help="draw the first N scenes to OUT's .png")
    parser.add_argument("--timing", action="store_true", help="also time one reading on 1 and 2 threads")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shards", type=Path, nargs="+", default=None,
                        help="measure on scene_frames' shards instead (their own appearance and camera pose, each "
                        "frame through its own calibration): e.g. FRAMES/shifted_*.npz")
    parser.add_argument("--out", type=Path, required=True, help="the report (JSON)")
    args = parser.parse_args(argv)
    reader = SceneReader.load(args.reader, threads=args.threads)
    if args.shards:
        from act_lab.vision.scene_frames import load
        from act_lab.vision.scene_train import measure

        report = {"shards": [str(p) for p in args.shards], **measure(reader, load(args.shards))}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        print(json.dumps(report, indent=1))
        return
    report, shown = evaluate(reader, parse_seeds(args.seeds), args.objects, args.pictures)
    if args.timing:
        report["reading_time"] = reading_time(reader)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    if shown:
        picture(shown, args.out.with_suffix(".png"))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
