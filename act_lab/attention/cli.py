"""`act-lab attention`: the find-the-cup networks from the command line.

  act-lab attention demo       one scene by hand and by the module, the order check, misses of the shipped models
  act-lab attention results    choose rates, run seeds 0-9 in parallel, write the results table
  act-lab attention models     train and calibrate the shipped selector and the two-layer Transformer
  act-lab attention picture    the lab pictures for a chosen scene and request
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from act_node.attention import networks as attention
from act_node.attention.networks import ITEMS, KINDS, make_scenes
from act_node.attention.selector import DEFAULT_MODEL, Selector, absence_rates
from act_node.paths import models_dir
from act_node.table_frame import kind_index

NEAREST_MODEL = "attention_transformer2_nearest"
# rates: what `act-lab attention results` chose on validation scenes (results/attention/results.json)
SELECTOR_RECIPE = {"network": "lookup", "task": "find", "seed": 0, "lr": 0.001}
NEAREST_RECIPE = {"network": "transformer-2", "task": "nearest", "seed": 0, "lr": 0.003}


def load_nearest(folder: Path | None = None) -> attention.Transformer:
    folder = folder or models_dir() / NEAREST_MODEL
    path = folder / "model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"two-layer Transformer weights missing: {path} "
                                "(make them with `act-lab attention models`)")
    network = attention.Transformer(layers=2)
    network.load_state_dict(load_file(str(path)))
    return network.eval()


def scene_for(seed: int, objects: int, request: str | None) -> tuple[torch.Tensor, int, attention.Scenes]:
    """One scene from `seed`; the request is the scene's own unless a kind on the table is named."""
    scene = make_scenes(1, objects, torch.Generator().manual_seed(seed))
    kinds = [ITEMS[i] for i in scene.tokens[0, :, :KINDS].argmax(dim=1).tolist()]
    if request is None:
        return scene.tokens[0], int(scene.request[0].argmax()), scene
    if request not in kinds:
        kind_index(request)  # unknown kinds get their own error
        raise SystemExit(f"seed {seed} has no {request} on the table (it has {', '.join(kinds)}); pick another seed")
    asked = kinds.index(request)
    again = make_scenes(1, objects, torch.Generator().manual_seed(seed))  # same scene, other request
    position = again.tokens[0, :, KINDS:]
    distance = (position - position[asked]).norm(dim=1)
    distance[asked] = float("inf")
    again.answers = {"find": position[asked][None], "nearest": position[distance.argmin()][None]}
    return scene.tokens[0], kind_index(request), again


def cmd_demo(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    lookup = attention.train("lookup", "find", seed=0)
    print(f"trained Lookup (find, seed 0, {attention.parameter_count(lookup):,} parameters) "
          f"in {time.perf_counter() - started:.0f} s")
    tokens, request, scene = scene_for(args.seed, 4, None)
    request_vec = scene.request
    with torch.no_grad():
        by_hand, weights, scores = lookup.by_hand(tokens[None], request_vec)
        by_module = lookup(tokens[None], request_vec)
        shuffled = lookup(tokens[None, torch.randperm(len(tokens))], request_vec)
    kinds = [ITEMS[i] for i in tokens[:, :KINDS].argmax(dim=1).tolist()]
    print(f"objects: {kinds}  request: {ITEMS[request]}")
    def rounded(values: torch.Tensor, digits: int = 4) -> list[float]:
        return [round(v, digits) for v in values.tolist()]

    print("scores: ", rounded(scores[0], 3), " weights:", rounded(weights[0]))
    print("answer by hand:", rounded(by_hand[0]), " by the module:", rounded(by_module[0]),
          " true:", rounded(scene.answers["find"][0]))
    print(f"objects in another order: largest difference {(shuffled - by_module).abs().max().item():.2e} m")
    print(f"miss: {attention.miss_cm(lookup, 'find', 4):.2f} cm with 4 objects, "
          f"{attention.miss_cm(lookup, 'find', 6):.2f} cm with 6")
    selector = Selector.load()
    choice = selector.select(tokens, ITEMS[request])
    print(f"shipped selector: target {choice.target_xy}, found={choice.found} (score {choice.score:.2f} > "
          f"threshold {choice.threshold:.2f})")
    for kind in ITEMS:
        if kind not in kinds:
            absent = selector.select(tokens, kind)
            print(f"asking for the {kind}, which is not on the table: found={absent.found} "
                  f"(score {absent.score:.2f}, threshold {absent.threshold:.2f})")
            break
    args.request, args.objects = None, 4
    cmd_picture(args)


def cmd_results(args: argparse.Namespace) -> None:
    from act_lab.attention.study import study

    rows = study(Path(args.out), workers=args.workers, epochs=args.epochs, scenes=args.scenes)
    print((Path(args.out) / "results.md").read_text())
    print(f"{len(rows)} rows written to {args.out}/results.md and results.json")


def cmd_models(args: argparse.Namespace) -> None:
    out = Path(args.out) if args.out else models_dir()
    recipe = dict(SELECTOR_RECIPE, lr=args.selector_lr)
    lookup = attention.train(recipe["network"], recipe["task"], seed=recipe["seed"], lr=recipe["lr"])
    selector, margins = Selector.calibrated(lookup)
    rates = absence_rates(selector)
    misses = {objects: attention.miss_cm(lookup, "find", objects) for objects in (4, 6)}
    selector.save(out / DEFAULT_MODEL, extra={"recipe": recipe, "margins": margins, "absence": rates,
                                              "miss_cm": misses})
    print(json.dumps({"selector": {"miss_cm": misses, "margins": margins, **rates}}, indent=1))
    transformer = attention.train(NEAREST_RECIPE["network"], NEAREST_RECIPE["task"], seed=NEAREST_RECIPE["seed"],
                                  lr=args.nearest_lr)
    (out / NEAREST_MODEL).mkdir(parents=True, exist_ok=True)
    weights = {k: v.contiguous() for k, v in transformer.state_dict().items()}
    save_file(weights, str(out / NEAREST_MODEL / "model.safetensors"))
    nearest = {objects: attention.miss_cm(transformer, "nearest", objects) for objects in (4, 6)}
    (out / NEAREST_MODEL / "metrics.json").write_text(json.dumps(
        {"recipe": dict(NEAREST_RECIPE, lr=args.nearest_lr), "miss_cm": nearest}, indent=1) + "\n")
    print(json.dumps({"transformer-2 nearest": {"miss_cm": nearest}}, indent=1))
    (out / DEFAULT_MODEL / "README.md").write_text(selector_card(recipe, misses, margins, rates))
    (out / NEAREST_MODEL / "README.md").write_text(nearest_card(dict(NEAREST_RECIPE, lr=args.nearest_lr), nearest))


def _training_line(recipe: dict) -> str:
    return (f"`{recipe['network']}` on task \"{recipe['task']}\", seed {recipe['seed']}: Adam at {recipe['lr']:g}, "
            f"batch {attention.BATCH}, {attention.EPOCHS[recipe['task']]} epochs over "
            f"{attention.TRAIN_SCENES:,} scenes of {attention.TRAIN_OBJECTS} objects, one thread. The rate is "
            f"the one `act-lab attention results` chose on validation scenes (mean miss over seeds 0-2).")


def selector_card(recipe: dict, misses: dict, margins: dict, rates: dict) -> str:
    by_objects = rates["miss_cm_by_objects"]
    rows = "\n".join(f"| {n} | {by_objects[n]:.3f} | {rates['false_absent'][n]:.2%} | "
                     f"{rates['false_found'][n]:.2%} |" if n in rates["false_found"] else
                     f"| {n} | {by_objects[n]:.3f} | {rates['false_absent'][n]:.2%} | (all 8 kinds on the table) |"
                     for n in sorted(by_objects))
    return f"""# selector_lookup

What: the find-the-cup `Lookup` network (one cross-attention layer, width 16, one head,
{attention.parameter_count(attention.Lookup()):,} parameters) with per-kind absence thresholds, loaded by
`act_node.attention.selector.Selector`. Input: one token per object (kind one-hot over {", ".join(ITEMS)}; x, y in
metres on the 1 m x 1 m table) and a requested kind. Output: the target (x, y), each object's attention
weight, and whether the kind is on the table.

How trained: {_training_line(recipe)} Made by `act-lab attention models`.

Absence: the best raw score (before the softmax) against a per-kind threshold. The score is affine in
the token, so its range over the whole table is exact; the threshold sits midway between the highest
score any other kind can reach and the lowest the requested kind can reach. Margins (that gap, in score
units; positive means no position on the table is misjudged): {", ".join(f"{k} {v:.2f}" for k, v in margins.items())}.

## Measured (fresh scenes, never seen in training)

Miss on 2,000 test scenes: {misses[4]:.3f} cm with 4 objects, {misses[6]:.3f} cm with 6.

2,000 scenes per object count (seed 30003): mean miss when the kind is there, false "absent" on scenes
with the kind, false "found" on scenes without it.

| objects | miss (cm) | false absent | false found |
| ---: | ---: | ---: | ---: |
{rows}

Limits: kinds must be distinct per scene (two of the requested kind is refused: attention would average
them); positions must lie on the table, [0, 1] m.
"""


def nearest_card(recipe: dict, misses: dict) -> str:
    return f"""# attention_transformer2_nearest

What: the two-layer `Transformer` (width 32, 2 heads, feed-forward 64, no dropout, request token first,
{attention.parameter_count(attention.Transformer(layers=2)):,} parameters) for the task "nearest": where
is the object nearest to the requested one. Used by `act-lab attention picture` to draw what each layer's
request token attends to.

How trained: {_training_line(recipe)} Made by `act-lab attention models`.

Measured: mean miss {misses[4]:.2f} cm on 2,000 fresh scenes with 4 objects, {misses[6]:.2f} cm with 6.
Seeds 0-9 of the same recipe are in `results/attention/results.md`.
"""


def cmd_picture(args: argparse.Namespace) -> None:
    from act_lab.attention.figure import lookup_picture, transformer_picture

    tokens, request, scene = scene_for(args.seed, args.objects, args.request)
    out = Path(args.out)
    stem = f"seed{args.seed}_{ITEMS[request]}"
    written = [
        lookup_picture(tokens, request, scene.answers["find"][0], Selector.load().network,
                       out / f"lookup_find_{stem}.png"),
        transformer_picture(tokens, request, scene.answers["nearest"][0], load_nearest(),
                            out / f"transformer2_nearest_{stem}.png"),
    ]
    for path in written:
        print(f"wrote {path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="act-lab attention", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="train Lookup once, check it by hand, draw the lab pictures")
    demo.add_argument("--seed", type=int, default=5, help="scene seed")
    demo.add_argument("--out", default="outputs/attention")
    demo.set_defaults(run=cmd_demo)
    results = commands.add_parser("results", help="the results table (seeds 0-9, rates chosen on validation)")
    results.add_argument("--out", default="results/attention")
    results.add_argument("--workers", type=int, default=None, help="processes (default: one per core)")
    results.add_argument("--epochs", type=int, default=None, help="override the epochs (for a quick look)")
    results.add_argument("--scenes", type=int, default=attention.TRAIN_SCENES, help="training scenes")
    results.set_defaults(run=cmd_results)
    models = commands.add_parser("models", help="train and calibrate the shipped models")
    models.add_argument("--out", default=None, help="models folder (default: the package's models/)")
    models.add_argument("--selector-lr", type=float, default=SELECTOR_RECIPE["lr"])
    models.add_argument("--nearest-lr", type=float, default=NEAREST_RECIPE["lr"])
    models.set_defaults(run=cmd_models)
    picture = commands.add_parser("picture", help="lab pictures for one scene and request")
    picture.add_argument("--seed", type=int, default=5)
    picture.add_argument("--objects", type=int, default=4)
    picture.add_argument("--request", default=None, help="a kind on the table (default: the scene's own)")
    picture.add_argument("--out", default="outputs/attention")
    picture.set_defaults(run=cmd_picture)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
