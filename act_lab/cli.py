"""`act-lab`: the experiments beside act_node (act-sim is what a user runs).

  act-lab record     act-lab record and the research inputs: --action-noise (recoveries), --raw-maps (the camera
                     recipe's backbone maps of the raw renders), --takeover-from (second attempts, act_lab.takeover)
  act-lab video      one expert episode for a seed, every camera side by side, as mp4 or gif
  act-lab expert     the scripted expert's success rate over seeded scenes (parallel over the cores)
  act-lab plannable  how many seeded scenes the expert cannot plan (scene sampling and planning only)
  act-lab curve      every checkpoint of a run (or several) on the same unseen seeds: curve.json, curve.png
  act-lab recipe     an ACT from an empty folder, every stage resumable (--kind cameras: the camera ACT;
                     --kind yaw: the launch default's, models/act_target_tool_yaw_dart)
  act-lab attention  the find-the-cup networks: demo, results (the study behind results/attention), models, picture
  act-lab encoder | frames | cache | act-train | yaw
                     the recipe's stages by hand (act_lab.vision: the encoder, its frames, the cached maps, ACT on
                     them, the yaw reader's scenes and head); `act-lab STAGE --help`
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from gymnasium.utils import seeding
from tqdm import tqdm

from act_node.cli import (
    add_env_arguments,
    add_record_arguments,
    cameras_of_checkpoint,
    check_record_arguments,
    env_settings,
    graph_config,
    make_env,
    record_dataset,
)
from act_node.config import FPS
from act_node.envs import make_env as make_pick_env
from act_node.episodes import EpisodeResult, run_episode
from act_node.observation import ENV_LAYOUTS, requested_kind
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert
from act_node.tabletop.kinematics import Unreachable
from act_node.tabletop.scene import sample_scene
from act_node.tabletop.table import HOME_LEROBOT
from act_node.tabletop.video import write_video
from act_node.tabletop.world import table_to_arm

# the stages' own command lines: `act-lab NAME ...` is `python -m MODULE ...`
STAGES = {"encoder": "act_lab.vision.encoder", "frames": "act_lab.vision.frames", "cache": "act_lab.vision.cache",
          "act-train": "act_lab.vision.act_train", "yaw": "act_lab.vision.yaw", "attention": "act_lab.attention.cli"}


def cmd_record(args: argparse.Namespace) -> None:
    """act-sim record with the research inputs: recoveries, raw maps, second attempts."""
    prog = "act-lab record"
    check_record_arguments(args, prog)
    if args.ray is not None and args.raw_maps:
        raise SystemExit(f"{prog}: --raw-maps records in this process; leave out --ray")
    if args.ray is not None and args.takeover_from:
        raise SystemExit(f"{prog}: --takeover-from records in this process; leave out --ray")
    latest = args.takeover_latest_s
    if latest is not None and not (math.isfinite(latest) and latest > 0):
        raise SystemExit(f"{prog}: --takeover-latest-s must be a time > 0 s, got {latest}")
    if latest is not None and not args.takeover_from:
        raise SystemExit(f"{prog}: --takeover-latest-s says when the expert takes over from --takeover-from's "
                         "checkpoint; give that too")
    if args.takeover_from and args.action_noise:
        raise SystemExit(f"{prog}: --action-noise pushes the expert off its own plan; --takeover-from records its "
                         "second attempts: record them in separate runs")
    raw_maps = None
    if args.raw_maps:
        from act_lab.vision.cache import RawMaps
        from act_node.paths import models_dir

        if not args.cameras:
            raise SystemExit(f"{prog}: --raw-maps needs camera images (--cameras)")
        backbone = Path(args.backbone) if args.backbone else models_dir() / "tabletop_encoder" / "backbone.safetensors"
        try:
            raw_maps = RawMaps(Path(args.raw_maps), backbone)
        except (FileNotFoundError, ValueError) as error:
            raise SystemExit(f"{prog}: {error}") from None
    if not args.takeover_from:
        env = make_env(args, environment_layout=args.environment_state or ENV_LAYOUTS[0])
        record_dataset(args, env, prog, action_noise=args.action_noise, raw_maps=raw_maps)
        return
    from act_lab.takeover import LATEST_S, Takeover
    from act_node.policy import CheckpointMismatch

    # renderer auto: the one a camera checkpoint's images were drawn with, as act-sim eval
    config = graph_config(args, policy="act", checkpoint=args.takeover_from)
    if config.renderer_mismatch():
        print(f"{prog}: warning: {config.renderer_mismatch()}", file=sys.stderr)
    env = make_pick_env(**config.env_kwargs())
    if args.environment_state not in (None, env.environment_layout):
        env.close()
        raise SystemExit(f"{prog}: --environment-state {args.environment_state}, but --takeover-from "
                         f"{args.takeover_from} takes {env.environment_layout}: the recording feeds it")
    try:
        takeover = Takeover.load(args.takeover_from, env, LATEST_S if latest is None else latest)
    except (CheckpointMismatch, FileNotFoundError, ValueError) as error:
        env.close()
        raise SystemExit(f"{prog}: --takeover-from {args.takeover_from}: {error}") from None
    record_dataset(args, env, prog, raw_maps=raw_maps, takeover=takeover)


def run_expert_episode(env: PickObjectEnv, seed: int, frames: list | None = None) -> EpisodeResult:
    """One seeded episode under the scripted expert, its steps executed as the graph executes them (the velocity
    bound: act_node.stepping.executed); appends captioned frames if a list is given.
    A scene the expert cannot plan is a failed episode of no steps, with the reason in `unplannable`."""
    from act_node.stepping import executed

    return run_episode(env, executed(env, ScriptedExpert(env)), seed, frames=frames)


def cmd_video(args: argparse.Namespace) -> None:
    env = make_env(args)
    frames: list[np.ndarray] = []
    result = run_expert_episode(env, args.seed, frames)
    if result.unplannable:
        env.close()
        raise SystemExit(f"act-lab video: seed {args.seed}: the expert cannot plan this scene "
                         f"({result.unplannable})")
    # hold the last frame a second so the outcome can be seen
    path = write_video(frames + [frames[-1]] * FPS, Path(args.out), FPS)
    env.close()
    print(json.dumps(result.to_dict()))
    print(f"wrote {path} ({len(frames)} frames)")


_EXPERT_ENV: PickObjectEnv | None = None  # a worker process's env, built once for all its episodes


def _start_expert_worker(settings: dict) -> None:
    global _EXPERT_ENV
    _EXPERT_ENV = make_pick_env(**settings)


def _expert_episode(seed: int) -> dict:
    return run_expert_episode(_EXPERT_ENV, seed).to_dict()


def cmd_expert(args: argparse.Namespace) -> None:
    seeds = list(range(args.first_seed, args.first_seed + args.episodes))
    if args.suite:  # a versioned seed set of act-sim eval --suite: its seeds and its object count
        from act_node.suites import suite

        try:
            chosen = suite(args.suite)
        except ValueError as error:
            raise SystemExit(f"act-lab expert: {error}") from None
        seeds, args.objects = list(chosen.seeds), chosen.objects
    workers = args.workers or os.cpu_count() or 1
    with Pool(workers, _start_expert_worker, (env_settings(args),)) as pool:
        episodes = list(tqdm(pool.imap(_expert_episode, seeds), total=len(seeds), desc="expert episodes", unit="ep"))
    successes = sum(e["success"] for e in episodes)
    by_kind: dict[str, list[bool]] = {}
    for e in episodes:
        by_kind.setdefault(requested_kind(e["task"]), []).append(e["success"])
    differ = [e for e in episodes if e["target_error_m"] > 0.01]
    report = {
        **({"suite": args.suite} if args.suite else {}),
        "objects": args.objects, "episodes": len(episodes), "success_rate": successes / len(episodes),
        "by_kind": {kind: f"{sum(v)}/{len(v)}" for kind, v in sorted(by_kind.items())},
        "mean_steps": float(np.mean([e["steps"] for e in episodes])),
        "target_source": args.target,
        "selector_off_by_more_than_1cm": len(differ),
        "selector_max_error_m": max((e["target_error_m"] for e in episodes), default=0.0),
        "selector_misses": sum(not e["selector_found"] for e in episodes),
        "failed_seeds": [e["seed"] for e in episodes if not e["success"]],
        "unplannable_seeds": [e["seed"] for e in episodes if e["unplannable"]],
    }
    print(json.dumps(report, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"report": report, "episodes": episodes}, indent=1) + "\n")
    if not math.isfinite(report["selector_max_error_m"]):
        print("the selector judged the requested kind absent in some episodes (target_error_m = inf)")


def cmd_plannable(args: argparse.Namespace) -> None:
    """Plan each seed's pick without simulating it. Default: the scene as sampled (true place and yaw,
    the home pose as start). --exact: the env's own reset (objects settled by physics, the target from
    the selector, the noisy start), i.e. exactly what `act-sim record` plans from, without cameras."""
    from act_node.tabletop.scene import scene_plan_failure

    seeds = range(args.first_seed, args.first_seed + args.seeds)
    env = PickObjectEnv(objects=args.objects, cameras=(), target_source=args.target) if args.exact else None
    expert = ScriptedExpert(env) if env is not None else None
    failures = []
    for seed in tqdm(seeds, desc="planning scenes", unit="scene"):
        if env is not None:
            observation, _ = env.reset(seed=seed)
            scene = env.scene
            try:
                expert.reset(observation)
                reason = None
            except Unreachable as error:
                reason = str(error)
        else:
            scene = sample_scene(seeding.np_random(seed)[0], args.objects)  # as PickObjectEnv.reset draws it
            reason = scene_plan_failure(scene, HOME_LEROBOT, FPS)
        if reason is not None:
            target = scene.target
            reach = float(np.hypot(*table_to_arm(target.xy)))
            bearing = math.degrees(math.atan2(*table_to_arm(target.xy)[::-1]))
            failures.append({"seed": seed, "kind": target.kind.name, "reach_m": round(reach, 4),
                             "bearing_deg": round(bearing, 1), "yaw_deg": round(math.degrees(target.yaw), 1),
                             "reason": reason})
    if env is not None:
        env.close()
    by_kind: dict[str, int] = {}
    for failure in failures:
        by_kind[failure["kind"]] = by_kind.get(failure["kind"], 0) + 1
    print(json.dumps({"objects": args.objects, "seeds": f"{seeds.start}-{seeds.stop - 1}",
                      "inputs": "env reset" if args.exact else "sampled scene", "unplannable": len(failures),
                      "by_kind": by_kind, "scenes": failures[: args.show]}, indent=1))


def cmd_curve(args: argparse.Namespace) -> None:
    from act_lab.curve import checkpoints, curve

    runs = {}
    for item in args.runs:
        label, sep, path = item.partition("=")
        runs[label if sep else Path(item).name] = Path(path if sep else item)
    try:
        cameras_of_checkpoint(args, str(checkpoints(next(iter(runs.values())))[-1][1]))
        config = graph_config(args, episodes=args.episodes, first_seed=args.first_seed,
                              replan_every=args.n_action_steps or 0, merge=args.merge)
        steps = [int(v) for v in args.steps.split(",") if v.strip()] if args.steps else None
        result = curve(runs, config, Path(args.out), workers=args.workers, every=args.every, steps=steps,
                       ray=args.ray)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"act-lab curve: {error}") from None
    except KeyboardInterrupt:
        print(f"act-lab curve: interrupted; {Path(args.out) / 'curve.json'} keeps the finished points (run it again "
              f"to go on)", file=sys.stderr)
        raise SystemExit(130) from None
    for label, points in result.items():
        for p in points:
            low, high = p["success_ci95"]
            print(f"{label} step {p['step']}: {p['success_rate']:.0%} ({low:.0%}-{high:.0%}), "
                  f"picked another object {p['picked_other']}")
    print(f"curve: {Path(args.out) / 'curve.png'}, {Path(args.out) / 'curve.json'}")


def cmd_recipe(args: argparse.Namespace) -> None:
    from dataclasses import replace

    from act_lab.recipe import Recipe, RecipeSettings

    def ensemble_coeff(text: str | None) -> float | None:  # None: the kind's; "none" is applied after
        if text is None or text.lower() == "none":
            return None
        try:
            return float(text)
        except ValueError:
            raise SystemExit(f"act-lab recipe: --temporal-ensemble-coeff {text!r}: a number, or none for chunks of "
                             "n_action_steps") from None

    for flag in ("episodes", "recovery_episodes", "more_episodes"):
        if getattr(args, flag) is not None and getattr(args, flag) < 0:
            raise SystemExit(f"act-lab recipe: --{flag.replace('_', '-')} {getattr(args, flag)}: a count of "
                             "demonstrations must be >= 0")
    try:
        settings = RecipeSettings.of_kind(
            args.kind, episodes=args.episodes, recovery_episodes=args.recovery_episodes,
            more_episodes=args.more_episodes, action_noise=args.action_noise, steps=args.steps,
            save_every=args.save_every, batch_size=args.batch_size, curve_every=args.curve_every,
            curve_episodes=args.curve_episodes, threads=args.threads, environment_state=not args.no_environment_state,
            encoder=args.encoder or "", device=args.device, eval_episodes=args.eval_episodes,
            environment_layout=args.environment_layout, ensemble_coeff=ensemble_coeff(args.temporal_ensemble_coeff),
            map_dropout=args.map_dropout, dim_model=args.dim_model, dim_feedforward=args.dim_feedforward,
            bf16=args.bf16)
        if args.temporal_ensemble_coeff is not None and args.temporal_ensemble_coeff.lower() == "none":
            settings = replace(settings, ensemble_coeff=None)  # chunks of n_action_steps
        state = Recipe(Path(args.out), settings).run(only=args.stage)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"act-lab recipe: {error}") from None
    print(json.dumps(state["stages"], indent=1))


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in STAGES:  # a stage's own parser
        import importlib

        sys.argv[0] = f"act-lab {argv[0]}"
        importlib.import_module(STAGES[argv[0]]).main(argv[1:])
        return
    args = make_parser().parse_args(argv)
    args.run(args)


def make_parser() -> argparse.ArgumentParser:
    """act-lab's parser (a stage's own flags are its module's)."""
    parser = argparse.ArgumentParser(prog="act-lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, module in STAGES.items():
        commands.add_parser(name, help=f"python -m {module} (act-lab {name} --help)", add_help=False)

    record = commands.add_parser("record", help="act-sim record and the research inputs (recoveries, raw maps, "
                                 "second attempts)")
    add_record_arguments(record)
    record.add_argument("--action-noise", type=float, default=0.0,
                        help="demonstrations of recoveries: smooth random offsets of this scale (1: about 4 degrees "
                        "a joint, the gripper clean) added to the executed actions, the expert's clean action "
                        "recorded; 0: none")
    record.add_argument("--raw-maps", default=None, metavar="DIR",
                        help="also run ACT's backbone on the raw camera renders and keep each saved episode's maps "
                        "in DIR (the camera recipe trains on them: the videos are lossy)")
    record.add_argument("--backbone", default=None,
                        help="the backbone for --raw-maps (default: models/tabletop_encoder/backbone.safetensors)")
    record.add_argument("--takeover-from", default=None, metavar="CHECKPOINT",
                        help="second attempts: this checkpoint acts from reset and the expert takes over where it "
                        "misses the grasp (or by --takeover-latest-s), planning again from there; only the "
                        "expert's part is recorded, and a seed the checkpoint succeeds on is skipped; "
                        "--environment-state defaults to the checkpoint's")
    record.add_argument("--takeover-latest-s", type=float, default=None,
                        help="with --takeover-from: the expert takes over by then at the latest (default 5 s)")
    record.set_defaults(run=cmd_record)

    video = commands.add_parser("video", help="an expert episode as a video")
    add_env_arguments(video)
    video.add_argument("--seed", type=int, default=0)
    video.add_argument("--out", default="outputs/expert_seed0.mp4", help=".mp4 or .gif")
    video.set_defaults(run=cmd_video)
    expert = commands.add_parser("expert", help="the scripted expert's success rate")
    add_env_arguments(expert)
    expert.add_argument("--episodes", type=int, default=100)
    expert.add_argument("--first-seed", type=int, default=0)
    expert.add_argument("--workers", type=int, default=None)
    expert.add_argument("--suite", default=None, metavar="NAME[@VERSION]",
                        help="act-sim eval's versioned seed set instead of --episodes, --first-seed and --objects")
    expert.add_argument("--out", default=None, help="write the report and every episode as JSON")
    expert.set_defaults(run=cmd_expert)

    plannable = commands.add_parser("plannable", help="count the seeded scenes the expert cannot plan")
    plannable.add_argument("--seeds", type=int, default=10000)
    plannable.add_argument("--first-seed", type=int, default=0)
    plannable.add_argument("--objects", type=int, default=4)
    plannable.add_argument("--show", type=int, default=20, help="list this many unplannable scenes")
    plannable.add_argument("--exact", action="store_true",
                           help="plan from the env's reset (physics-settled yaw, selector target): slower")
    plannable.add_argument("--target", choices=("selector", "truth"), default="selector", help="with --exact")
    plannable.set_defaults(run=cmd_plannable)

    curves = commands.add_parser("curve", help="a learning curve: every checkpoint of lerobot-train runs on the "
                                 "same unseen seeds, success with its 95%% interval (curve.json, curve.png)")
    add_env_arguments(curves, None, None, cameras=None)
    curves.add_argument("runs", nargs="+", metavar="RUN", help="a lerobot-train output_dir, or label=output_dir")
    curves.add_argument("--episodes", type=int, default=50)
    curves.add_argument("--first-seed", type=int, default=1000)
    curves.add_argument("--n-action-steps", type=int, default=None, help="default: the checkpoint's")
    curves.add_argument("--merge", choices=("auto", "replace", "ensemble"), default="auto",
                        help="as act-sim eval's (auto: each checkpoint's own)")
    curves.add_argument("--every", type=int, default=1, help="every K-th checkpoint (and the last)")
    curves.add_argument("--steps", default=None, help="only the checkpoints at these steps (comma-separated)")
    curves.add_argument("--workers", type=int, default=1, help="parallel environments (processes)")
    curves.add_argument("--out", default="outputs/curve")
    curves.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="the episodes as Ray tasks instead of --workers: on a cluster started here (no "
                        "ADDRESS), the one `ray start` runs on this machine (auto) or at HOST:PORT")
    curves.set_defaults(run=cmd_curve)

    recipe = commands.add_parser("recipe", help="an ACT from an empty folder (--kind cameras: encoder, record, cache, "
                                 "act, curve, eval; --kind yaw, the launch default's: record, act, curve, eval); run "
                                 "again to go on where it stopped")
    recipe.add_argument("--out", required=True, help="the recipe's folder")
    recipe.add_argument("--kind", choices=["cameras", "yaw"], default="cameras",
                        help="cameras: the camera ACT (image tokens through the pretrained, frozen backbone); yaw: "
                        "models/act_target_tool_yaw_dart's recipe (no image tokens, the yaw read from the cameras "
                        "by models/yaw_reader; ACT at width 128, feed-forward 512, under bf16 autocast, on 360 clean "
                        "demonstrations and 240 pushed off the plan, 30,000 steps). cameras defaults to 360 clean "
                        "demonstrations, 40,000 steps; both at batch 64, ensembled (act_lab/recipe.py "
                        "KIND_DEFAULTS; the camera recipe's first run, "
                        "results/act_cameras: --episodes 240 --recovery-episodes 120 --steps 30000 --batch-size 8 "
                        "--save-every 2500 --curve-every 2 --temporal-ensemble-coeff none --environment-layout target)")
    recipe.add_argument("--episodes", type=int, default=None, help="clean expert demonstrations to record (360)")
    recipe.add_argument("--recovery-episodes", type=int, default=None,
                        help="then demonstrations pushed off the plan on the way to the object (recoveries; "
                        "cameras 0, yaw 240)")
    recipe.add_argument("--more-episodes", type=int, default=None,
                        help="then more clean demonstrations, recorded after the clean and pushed ones (0: 240 more "
                        "measured no gain: results/act_cameras/README.md)")
    recipe.add_argument("--action-noise", type=float, default=None,
                        help="the pushes' scale (act-lab record --action-noise; 1)")
    recipe.add_argument("--steps", type=int, default=None, help="ACT training steps (cameras 40,000, yaw 30,000)")
    recipe.add_argument("--batch-size", type=int, default=None, help="ACT's batch (64)")
    recipe.add_argument("--save-every", type=int, default=None, help="ACT steps between checkpoints (1,000)")
    recipe.add_argument("--temporal-ensemble-coeff", default=None, metavar="C",
                        help="written into the checkpoints' config.json (n_action_steps 1): how they run in eval, "
                        "the curve and the graph; none: chunks of n_action_steps (0.01)")
    recipe.add_argument("--environment-layout", choices=list(ENV_LAYOUTS), default=None,
                        help="observation.environment_state (act-sim record --environment-state): cameras "
                        "target_tool (default) or target; yaw target_tool_yaw_grasp (default) or target_tool_yaw")
    recipe.add_argument("--device", default=None, help="where the ACT stage trains: cpu (default) or cuda[:N]")
    recipe.add_argument("--map-dropout", type=float, default=None, metavar="P",
                        help="dropout on the cached image maps while the camera ACT trains (0.5; 0: none, as the "
                        "recipe's first runs)")
    recipe.add_argument("--dim-model", type=int, default=None, metavar="D",
                        help="ACT's transformer width (cameras 256, yaw 128; a multiple of its 8 heads)")
    recipe.add_argument("--dim-feedforward", type=int, default=None, metavar="F",
                        help="ACT's feed-forward width (cameras 1024, yaw 512)")
    recipe.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                        help="the ACT stage's forward pass under bfloat16 autocast (checkpoints stay float32); "
                        "the yaw recipe's default, --no-bf16 for float32 throughout")
    recipe.add_argument("--curve-every", type=int, default=None, help="every K-th checkpoint on the curve (10)")
    recipe.add_argument("--curve-episodes", type=int, default=None, help="unseen seeds a curve point (50)")
    recipe.add_argument("--eval-episodes", type=int, default=None,
                        help="the eval stage's seeds from 2000, 4 objects (200: the cards')")
    recipe.add_argument("--threads", type=int, default=None, help="torch threads and evaluation workers (2)")
    recipe.add_argument("--no-environment-state", action="store_true",
                        help="the ablation: ACT without the target and request (DIR/act_no_target)")
    recipe.add_argument("--encoder", default=None, help="a folder with backbone.safetensors and backbone.json "
                        "(models/tabletop_encoder, the shipped one) instead of the encoder stage")
    recipe.add_argument("--stage", action="append", choices=["encoder", "record", "cache", "act", "curve", "eval"],
                        help="only this stage (repeat for more); default: all of the kind's, in order")
    recipe.set_defaults(run=cmd_recipe)

    return parser


if __name__ == "__main__":
    main()
