"""`act-lab curve`: a learning curve. Every checkpoint a lerobot-train run saved (output_dir/checkpoints/NNNNNN)
is evaluated on the same unseen seeds; the success rate with its 95% (Wilson) interval goes to curve.json
and curve.png, one line per run, so a recipe and its ablation (say, without the target) share a plot.
"""

from __future__ import annotations

import json
from pathlib import Path

from act_node.config import GraphConfig
from act_node.evaluate import evaluate, wilson_interval


def checkpoints(run: Path) -> list[tuple[int, Path]]:
    """(step, pretrained_model folder) of every numbered checkpoint of a run, by step."""
    found = []
    for folder in sorted((Path(run) / "checkpoints").glob("[0-9]*")):
        model = folder / "pretrained_model"
        if folder.name.isdigit() and (model / "config.json").is_file():
            found.append((int(folder.name), model))
    if not found:
        raise FileNotFoundError(f"no checkpoints in {Path(run) / 'checkpoints'} (expected NNNNNN/pretrained_model)")
    return found


def batch_size(model: Path) -> int | None:
    """The batch a checkpoint was trained at: act_lab.vision.act_train's act_node_training.json or lerobot-train's
    train_config.json in its pretrained_model folder; None when neither says."""
    for name in ("act_node_training.json", "train_config.json"):
        path = Path(model) / name
        if path.is_file():
            size = json.loads(path.read_text()).get("batch_size")
            if size is not None:
                return int(size)
    return None


def curve(runs: dict[str, Path], config: GraphConfig, out: Path, workers: int = 1,
          every: int = 1, steps: list[int] | None = None, ray: str | None = None) -> dict[str, list[dict]]:
    """Evaluate every `every`-th checkpoint of each run (and always the last), or only those at `steps`;
    reuse points already in out/curve.json for the same seeds and settings, and a point's finished episodes
    (evaluate's journal), so that an interrupted curve resumes and a later call adds points. `ray`: the episodes
    as Ray tasks (evaluate's `ray`)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "curve.json"
    settings = {"objects": config.objects, "first_seed": config.first_seed, "episodes": config.episodes,
                "replan_every": config.replan_every, "target_source": config.target_source,
                **({"merge": config.merge} if config.merge != "auto" else {})}  # auto: as curves before it was one
    done = json.loads(path.read_text()) if path.is_file() else {}
    if done.get("settings") != settings:
        done = {"settings": settings, "runs": {}}
    for label, run in runs.items():
        points = {p["step"]: p for p in done["runs"].get(label, [])}
        found = checkpoints(run)
        if steps:
            missing = sorted(set(steps) - {step for step, _ in found})
            if missing:
                raise FileNotFoundError(f"{label}: no checkpoint at steps {missing} in {Path(run) / 'checkpoints'}")
            chosen = [c for c in found if c[0] in steps]
        else:
            chosen = [c for i, c in enumerate(found) if i % every == every - 1 or i == len(found) - 1]
        for step, model in chosen:
            if step in points and points[step].get("checkpoint") == str(model):
                points[step].setdefault("batch_size", batch_size(model))  # points of curves from before it was kept
                continue
            print(f"{label}: step {step}", flush=True)
            report = evaluate(config.replace(policy="act", checkpoint=str(model)), out=out / label / f"{step:06d}",
                              videos=0, workers=workers, ray=ray, resume=True)  # a point cut short goes on
            points[step] = {"step": step, "checkpoint": str(model), "batch_size": batch_size(model),
                            **{k: report[k] for k in ("episodes", "success_rate", "success_ci95", "grasp_rate",
                                                      "picked_other", "mean_sum_reward", "mean_episode_length")}}
            done["runs"][label] = [points[s] for s in sorted(points)]
            path.write_text(json.dumps(done, indent=1) + "\n")  # after every point: an interrupt loses one
    path.write_text(json.dumps(done, indent=1) + "\n")  # with the batch sizes filled in above (the same dicts)
    plot(done, out / "curve.png")
    return done["runs"]


def batch_labels(runs: dict[str, list[dict]]) -> tuple[str, dict[str, str]]:
    """The step axis's label and each run's legend name: one batch for every point, on the axis ("training steps
    (batch 64)"); runs at different batches, each in its name; a batch not known (a curve.json from before points
    kept it), said nowhere rather than guessed."""
    batches = {label: {p.get("batch_size") for p in points} for label, points in runs.items()}
    every = set().union(*batches.values())
    if len(every) == 1 and None not in every:
        return f"training steps (batch {every.pop()})", {label: label for label in runs}
    return "training steps", {label: f"{label} (batch {next(iter(sizes))})" if len(sizes) == 1 and None not in sizes
                              else label for label, sizes in batches.items()}


def plot(done: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    steps_label, names = batch_labels(done["runs"])
    for label, points in done["runs"].items():
        label = names[label]
        steps = [p["step"] for p in points]
        rates = [100 * p["success_rate"] for p in points]
        low = [100 * (p["success_rate"] - p["success_ci95"][0]) for p in points]
        high = [100 * (p["success_ci95"][1] - p["success_rate"]) for p in points]
        line = axis.errorbar(steps, rates, yerr=[low, high], marker="o", capsize=4, label=f"{label}: success")
        if all("grasp_rate" in p for p in points):
            grasp = [100 * p["grasp_rate"] for p in points]
            intervals = [wilson_interval(round(p["grasp_rate"] * p["episodes"]), p["episodes"]) for p in points]
            low = [g - 100 * i[0] for g, i in zip(grasp, intervals)]
            high = [100 * i[1] - g for g, i in zip(grasp, intervals)]
            axis.errorbar(steps, grasp, yerr=[low, high], linestyle="--", marker="x", capsize=3,
                          color=line[0].get_color(), alpha=0.7, label=f"{label}: held the requested object")
    settings = done["settings"]
    axis.set_xlabel(steps_label)
    axis.set_ylabel("% of episodes (95% Wilson interval)")
    axis.set_ylim(0, 100)
    axis.set_title(f"picks the requested object: {settings['episodes']} unseen seeds from {settings['first_seed']}, "
                   f"{settings['objects']} objects", fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(png)
    plt.close(figure)
