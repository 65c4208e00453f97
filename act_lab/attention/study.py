"""The results table: each network's Adam rate chosen on validation scenes by the mean miss over seeds 0-2,
then seeds 0-9 at that rate, tested on 2,000 fresh scenes with 4 and with 6 objects.

Runs train in parallel, one process per core, one thread each. Output: results.json (every run, the
chosen rates, the summary) and results.md (mean, spread, range per network, task and object count).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
from dataclasses import asdict, dataclass
from multiprocessing import Pool
from pathlib import Path

from tqdm import tqdm

from act_node.attention import networks as attention

# What is compared: "find" with every network; "nearest" with the attention networks and the larger MLP.
STUDY = {
    "find": ("lookup", "transformer-1", "transformer-2", "plain-16", "plain-256"),
    "nearest": ("lookup", "transformer-1", "transformer-2", "plain-256"),
}
RATES = (0.01, 0.003, 0.001, 0.0003)  # a half-decade grid spanning the page's choices
SELECTION_SEEDS = (0, 1, 2)
SEEDS = tuple(range(10))
TEST_OBJECTS = (4, 6)


@dataclass(frozen=True)
class Run:
    task: str
    network: str
    lr: float
    seed: int


def evaluate_run(run: Run, epochs: int | None = None, scenes: int = attention.TRAIN_SCENES) -> dict:
    network = attention.train(run.network, run.task, seed=run.seed, lr=run.lr, epochs=epochs, scenes=scenes)
    result = asdict(run)
    result["parameters"] = attention.parameter_count(network)
    result["validation_miss_cm"] = attention.miss_cm(network, run.task, attention.TRAIN_OBJECTS,
                                                     seed=attention.VALIDATION_SEED)
    for objects in TEST_OBJECTS:
        result[f"miss_cm_{objects}"] = attention.miss_cm(network, run.task, objects)
    return result


def _evaluate(args: tuple[Run, int | None, int]) -> dict:
    return evaluate_run(*args)


def run_all(runs: list[Run], workers: int, desc: str, epochs: int | None, scenes: int) -> list[dict]:
    jobs = [(run, epochs, scenes) for run in runs]
    with Pool(workers) as pool:
        return list(tqdm(pool.imap_unordered(_evaluate, jobs), total=len(jobs), desc=desc, unit="run"))


def choose_rates(results: list[dict]) -> dict[str, float]:
    """Per task/network, the rate with the lowest mean validation miss over the selection seeds."""
    chosen = {}
    def mean_miss(task: str, network: str, lr: float) -> float:
        return statistics.mean(r["validation_miss_cm"] for r in results
                               if (r["task"], r["network"], r["lr"]) == (task, network, lr))

    for task, networks in STUDY.items():
        for network in networks:
            chosen[f"{task}/{network}"] = min(RATES, key=functools.partial(mean_miss, task, network))
    return chosen


def summarize(results: list[dict], chosen: dict[str, float]) -> list[dict]:
    rows = []
    for task, networks in STUDY.items():
        for network in networks:
            lr = chosen[f"{task}/{network}"]
            runs = [r for r in results if (r["task"], r["network"], r["lr"]) == (task, network, lr)]
            row = {"task": task, "network": network, "parameters": runs[0]["parameters"], "lr": lr, "seeds": len(runs)}
            for objects in TEST_OBJECTS:
                misses = [r[f"miss_cm_{objects}"] for r in runs]
                row[f"mean_cm_{objects}"] = statistics.mean(misses)
                row[f"std_cm_{objects}"] = statistics.stdev(misses) if len(misses) > 1 else 0.0
                row[f"min_cm_{objects}"], row[f"max_cm_{objects}"] = min(misses), max(misses)
            rows.append(row)
    return rows


def markdown(rows: list[dict], settings: dict) -> str:
    lines = [
        "# Find the cup: misses of each network",
        "",
        f"Mean miss in cm on {attention.EVAL_SCENES:,} fresh scenes, mean ± standard deviation over seeds "
        f"{SEEDS[0]}-{SEEDS[-1]} (min-max in brackets). Trained on {settings['scenes']:,} scenes of "
        f"{attention.TRAIN_OBJECTS} objects, Adam, batch {attention.BATCH}, "
        f"{' and '.join(f'{n} epochs for {task}' for task, n in settings['epochs'].items())}; "
        f"rate chosen from {list(RATES)} by the mean validation miss over seeds {list(SELECTION_SEEDS)}.",
        "",
        "| task | network | parameters | rate | 4 objects (cm) | 6 objects (cm) |",
        "| --- | --- | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        cells = [f"{row[f'mean_cm_{n}']:.2f} ± {row[f'std_cm_{n}']:.2f} "
                 f"[{row[f'min_cm_{n}']:.2f}-{row[f'max_cm_{n}']:.2f}]" for n in TEST_OBJECTS]
        lines.append(f"| {row['task']} | {row['network']} | {row['parameters']:,} | {row['lr']:g} | "
                     f"{cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def study(out: Path, workers: int | None = None, epochs: int | None = None,
          scenes: int = attention.TRAIN_SCENES) -> list[dict]:
    """Choose rates, run every seed, write results.json and results.md under `out`."""
    workers = workers or os.cpu_count() or 1
    selection = [Run(task, network, lr, seed) for task, networks in STUDY.items() for network in networks
                 for lr in RATES for seed in SELECTION_SEEDS]
    results = run_all(selection, workers, "choosing rates", epochs, scenes)
    chosen = choose_rates(results)
    rest = [Run(task, network, chosen[f"{task}/{network}"], seed) for task, networks in STUDY.items()
            for network in networks for seed in SEEDS if seed not in SELECTION_SEEDS]
    results += run_all(rest, workers, "seeds 3-9", epochs, scenes)
    rows = summarize(results, chosen)
    settings = {"scenes": scenes, "epochs": epochs or attention.EPOCHS, "rates": list(RATES),
                "selection_seeds": list(SELECTION_SEEDS), "seeds": list(SEEDS),
                "validation_seed": attention.VALIDATION_SEED, "test_seed": attention.TEST_SEED}
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"settings": settings, "chosen_rates": chosen, "summary": rows,
                                                  "runs": sorted(results, key=lambda r: tuple(r.values()))},
                                                 indent=1) + "\n")
    (out / "results.md").write_text(markdown(rows, settings))
    plot_runs(results, chosen, out / "results.png")
    return rows


def plot_runs(results: list[dict], chosen: dict[str, float], path: Path) -> Path:
    """Every run: validation miss against the rate, one panel per task and network; the chosen rate's
    seeds 0-9 at 4 and 6 objects beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(task, network) for task, networks in STUDY.items() for network in networks]
    fig, axes = plt.subplots(2, (len(panels) + 1) // 2, figsize=(3.2 * ((len(panels) + 1) // 2), 6.4))
    for ax, (task, network) in zip(axes.flat, panels):
        runs = [r for r in results if (r["task"], r["network"]) == (task, network)]
        tried = [r for r in runs if r["seed"] in SELECTION_SEEDS]
        ax.scatter([r["lr"] for r in tried], [r["validation_miss_cm"] for r in tried], s=12, color="#888",
                   label="validation, seeds 0-2")
        final = [r for r in runs if r["lr"] == chosen[f"{task}/{network}"]]
        for objects, colour in zip(TEST_OBJECTS, ("#1f6feb", "#d1495b")):
            ax.scatter([r["lr"] * 1.15 for r in final], [r[f"miss_cm_{objects}"] for r in final], s=12,
                       color=colour, marker="x", label=f"test, {objects} objects, seeds 0-9")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{task}: {network}", fontsize=9)
        ax.set_xlabel("Adam rate")
        ax.set_ylabel("miss (cm)")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
