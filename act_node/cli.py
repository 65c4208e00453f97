"""`act-sim`: what a user of act_node runs, from the command line.

  act-sim launch   the ROS 2 node graph of launch/sim.launch.py (robot:=so101: so101.launch.py) without the
                   launch package: act-sim launch policy:=expert episodes:=1 video_dir:=outputs/graph
                   (record:=DIR records the graph's episodes; teleop:=leader leader_port:=... a leader arm drives)
  act-sim eval     a LeRobot checkpoint over seeded episodes in the sim: success rate, CI, rewards, videos
                   (--ros: through the ROS 2 graph instead of in-process; --suite: a fixed, versioned seed set)
  act-sim compare  two evaluations on the same seeds: paired table, McNemar's exact p, by kind and by outcome
  act-sim record   the scripted expert's episodes as a LeRobotDataset (v3.0) under a local root (--resume: append)
  act-sim train    LeRobot's training (lerobot-train) with this task's ACT configuration
  act-sim bag2dataset  a rosbag2 bag of the graph (MCAP or sqlite3) to a LeRobotDataset, as the recorder node
  act-sim ctl      the ros2 CLI calls docs/arm.md asks for, without a ROS install: stop, estop, reset, run TASK,
                   end, record-start, record-stop, record-discard, target X Y, bag OUT
  act-sim calibrate  where the front camera stands over the table, from one image of a chessboard lying on it
                   (OpenCV's PnP): the file scene:=cameras reads on the arm (camera_calibration:=FILE)

The experiments (recipes, curves, second attempts, the expert's statistics, encoder and reader training) are
`act-lab`'s (act_lab/cli.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from act_node.config import (
    DEFAULT_CAMERAS,
    FPS,
    SIM_IMAGE_SIZE,
    TRAIN_IMAGE_SIZE,
    GraphConfig,
)
from act_node.envs import make_env as make_pick_env
from act_node.observation import ENV_LAYOUTS, JOINT_LAYOUTS
from act_node.settings import SETTINGS
from act_node.tabletop.env import PickObjectEnv

_TABLE_DEFAULT = object()


def graph_flag(parser: argparse.ArgumentParser, flag: str, setting: str, default=_TABLE_DEFAULT, note: str = "",
               **more):
    """An act-sim flag that is a graph setting: its type, choices, default and help from the one table
    (act_node.settings.SETTINGS[setting]); `default`: the command's own where it needs another, `note` saying what
    it means. tests/test_settings.py fails for a graph flag made otherwise."""
    entry = SETTINGS[setting]
    kind = type(entry.default)
    action = parser.add_argument(flag, type=kind if kind in (int, float) else None, choices=entry.choices,
                                 default=(entry.default if not isinstance(entry.default, tuple)
                                          else ",".join(entry.default)) if default is _TABLE_DEFAULT else default,
                                 help=entry.description + (f" ({note})" if note else ""), **more)
    action.setting = setting
    return action


def graph_config(args: argparse.Namespace, **fields) -> GraphConfig:
    """The checked configuration from the command line's table-top flags (and any other fields)."""
    try:
        return GraphConfig(objects=args.objects, cameras=args.cameras, image_height=args.height,
                           image_width=args.width, target_source=args.target,
                           renderer=getattr(args, "renderer", "auto"),
                           scene=getattr(args, "scene", SETTINGS["scene"].default),
                           scene_reader=getattr(args, "scene_reader", ""), **fields)
    except ValueError as error:
        raise SystemExit(f"act-sim: {error}") from None


def env_settings(args: argparse.Namespace) -> dict:
    """PickObjectEnv's keyword arguments from the command line, for the expert's commands (video, expert, record):
    the expert drives, so no checkpoint chooses the layout; record gives its own (--environment-state)."""
    return graph_config(args, policy="expert").env_kwargs()


def make_env(args: argparse.Namespace, **overrides) -> PickObjectEnv:
    return make_pick_env(**{**env_settings(args), **overrides})


def check_record_arguments(args: argparse.Namespace, prog: str) -> None:
    """SystemExit naming the flag when act-sim record's (or act-lab record's) common flags do not fit together."""
    if args.after_success_s < 0:
        raise SystemExit(f"{prog}: --after-success-s must be >= 0 seconds, got {args.after_success_s}")
    if args.ray is not None and args.resume:
        raise SystemExit(f"{prog}: --ray records a new dataset; go on with --resume without --ray")


def cmd_record(args: argparse.Namespace) -> None:
    check_record_arguments(args, "act-sim record")
    record_dataset(args, make_env(args, environment_layout=args.environment_state or ENV_LAYOUTS[0]),
                   "act-sim record")


def record_dataset(args: argparse.Namespace, env: PickObjectEnv, prog: str, action_noise: float = 0.0,
                   raw_maps=None, takeover=None) -> None:
    """Record --episodes expert episodes with `env` (closed at the end) into --root and print what was recorded;
    act-lab record passes its research inputs (action noise, raw maps, second attempts: act_node.record.record)."""
    import errno
    import signal

    from act_node.record import ResumeRefused, record

    try:
        if args.ray is not None:  # shards recorded as Ray tasks, merged in seed order (act_node.distributed)
            from act_node.distributed import record_ray

            summary = record_ray({**env_settings(args), "renderer": env.renderer,
                                  "environment_layout": env.environment_layout}, args.repo_id, Path(args.root),
                                 args.episodes, first_seed=args.first_seed or 0, keep_failures=args.keep_failures,
                                 after_success=round(args.after_success_s * env.fps), action_noise=action_noise,
                                 address=args.ray)
        else:
            summary = record(env, args.repo_id, Path(args.root), args.episodes, first_seed=args.first_seed,
                             keep_failures=args.keep_failures, resume=args.resume,
                             after_success=round(args.after_success_s * env.fps), action_noise=action_noise,
                             raw_maps=raw_maps, takeover=takeover)
    except (FileExistsError, FileNotFoundError, ResumeRefused) as error:
        raise SystemExit(f"{prog}: {' '.join([str(error), *getattr(error, '__notes__', [])])}") from None
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        raise SystemExit(f"{prog}: the disk is full ({error}); {' '.join(getattr(error, '__notes__', []))}. "
                         f"Free some space and go on with --resume.") from None
    finally:
        env.close()
    print(json.dumps({"root": str(summary.root), "episodes": summary.recorded, "frames": summary.frames,
                      "dataset_episodes": summary.total_episodes, "dataset_frames": summary.total_frames,
                      "skipped_failed_seeds": summary.skipped_seeds, "unplannable_seeds": summary.unplannable_seeds,
                      **({"policy_success_seeds": summary.policy_successes} if takeover is not None else {}),
                      "seconds": round(summary.seconds, 1),
                      "frames_per_second": round(summary.frames / max(summary.seconds, 1e-9), 1),
                      "stopped_by": summary.stopped_by, "dropped_frames": summary.dropped_frames}, indent=1))
    if summary.stopped_by:
        print(f"stopped by {summary.stopped_by}: {summary.root} holds {summary.total_episodes} complete episodes; "
              f"add --resume to go on")
        raise SystemExit(128 + signal.Signals[summary.stopped_by].value)


def cmd_bag2dataset(args: argparse.Namespace) -> None:
    from act_node.bags import bag_to_dataset
    from act_node.observation import FRAME_MAX_AGE
    from act_node.record import ResumeRefused
    from act_node.recording import RecorderSettings

    ranges = None
    if args.episode:
        try:
            ranges = [tuple(float(v) for v in text.split(":")) for text in args.episode]
        except ValueError:
            raise SystemExit(f"act-sim bag2dataset: --episode takes START:END seconds, got {args.episode}") from None
        if any(len(r) != 2 or r[1] <= r[0] for r in ranges):
            raise SystemExit(f"act-sim bag2dataset: --episode takes START:END with END > START, got {args.episode}")
    if args.no_target and args.environment_state != ENV_LAYOUTS[0]:
        raise SystemExit(f"act-sim bag2dataset: --environment-state {args.environment_state} is a layout of the "
                         "target's environment_state, and --no-target records none")
    cameras = tuple(c.strip() for c in args.cameras.split(",") if c.strip())
    settings = RecorderSettings(Path(args.out), args.repo_id, cameras, args.fps, not args.no_target,
                                args.robot_type, args.keep_failures, args.resume, image_writer_threads=2,
                                environment_layout=args.environment_state,
                                # an arm's bag (--episode ranges): cameras on their own clocks; the sim's: exact
                                frame_max_age=args.frame_max_age if args.frame_max_age is not None else
                                FRAME_MAX_AGE if ranges else 0.0, camera_fps=tuple(args.camera_fps or ()))
    try:
        summary = bag_to_dataset(args.bag, settings, args.namespace, ranges, args.task)
    except (FileNotFoundError, FileExistsError, ResumeRefused, ValueError) as error:
        raise SystemExit(f"act-sim bag2dataset: {error}") from None
    print(json.dumps({"root": str(summary.root), "saved": summary.saved, "dropped": summary.dropped,
                      "dataset_episodes": summary.episodes, "messages": summary.messages,
                      "unreadable": summary.unreadable, "problems": summary.problems}, indent=1))


def cmd_train(args: argparse.Namespace, extra: list[str]) -> None:
    from act_node.training import train

    try:
        checkpoint = train(Path(args.dataset_root), args.repo_id, Path(args.output_dir), args.steps, args.device,
                           extra, save_freq=args.save_freq, resume=args.resume,
                           num_processes=args.num_processes, port=args.main_process_port)
    except (FileNotFoundError, FileExistsError, ValueError) as error:
        raise SystemExit(f"act-sim train: {error}") from None
    print(f"checkpoint: {checkpoint}")


def cmd_eval(args: argparse.Namespace) -> None:
    from act_node.evaluate import parse_rename_map

    try:
        rename_map = parse_rename_map(args.rename_map) if args.rename_map else None
    except ValueError as error:
        raise SystemExit(f"act-sim eval: {error}") from None
    cameras_of_checkpoint(args, args.policy_path, rename_map or {})
    suite = _suite_of(args)
    if args.ros:
        if args.resume:
            raise SystemExit("act-sim eval: --resume goes on from an in-process evaluation's episodes; --ros runs "
                             "every episode through the graph anew: drop one of them")
        eval_over_ros(args)
        return
    from act_node.evaluate import evaluate
    from act_node.policy import CheckpointMismatch

    config = graph_config(args, policy="act", checkpoint=args.policy_path, episodes=args.episodes,
                          first_seed=args.first_seed, max_steps=args.max_steps,
                          replan_every=args.n_action_steps or 0, device=args.device, merge=args.merge)
    try:
        given = ", ".join(f"{ours} as {theirs}" for theirs, ours in _given_cameras(config, rename_map).items())
        print(f"act-sim eval: the sim's cameras at {config.image_height}x{config.image_width}: {given}",
              file=sys.stderr)
        report = evaluate(config, out=args.out, videos=args.videos, workers=args.workers, ray=args.ray,
                          resume=args.resume, rename_map=rename_map, suite=suite, batch=args.batch)
    except (CheckpointMismatch, FileNotFoundError, ValueError) as error:
        raise SystemExit(f"act-sim eval: {error}") from None
    except KeyboardInterrupt as error:
        print(f"act-sim eval: interrupted; {error or 'no episode had finished'}", file=sys.stderr)
        raise SystemExit(130) from None
    low, high = report["success_ci95"]
    print(f"success {report['success_rate']:.1%} (95% CI {low:.1%}-{high:.1%}) over {report['episodes']} episodes; "
          f"mean reward {report['mean_sum_reward']:.2f}, mean length {report['mean_episode_length']:.0f} steps, "
          f"{report['mean_inference_s'] * 1000:.0f} ms a chunk")
    if report["selector_misses"] or report["episodes_clamped"]:
        print(f"the Selector missed the requested kind in {report['selector_misses']} episodes; commands were "
              f"clamped in {report['episodes_clamped']}")
    print(f"report: {Path(args.out) / 'report.json'}; videos: {', '.join(report['videos'])}")


def cmd_compare(args: argparse.Namespace) -> None:
    from act_node.report import compare, draw_compare, load_report

    try:
        result = compare(load_report(args.a), load_report(args.b))
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"act-sim compare: {error}") from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(result, indent=1) + "\n")
    draw_compare(result, out / "compare.png")
    print(f"A {result['a']}\nB {result['b']}\n{'':22s} {'A':>5s} {'B':>5s} {'both':>5s} {'only A':>6s} {'only B':>6s} "
          f"{'neither':>7s}  McNemar p")
    rows = [("success", result["success"])] + [(f"  {k}", t) for k, t in result["by_kind"].items()]
    rows += [(f"ended {m}", t) for m, t in result["by_mode"].items()]
    for name, t in rows:
        print(f"{name:22s} {t['a']:5d} {t['b']:5d} {t['both']:5d} {t['only_a']:6d} {t['only_b']:6d} "
              f"{t['neither']:7d}  {t['mcnemar_p']:.3g}")
    print(f"{out / 'compare.json'}, {out / 'compare.png'}")


def _suite_of(args: argparse.Namespace):
    """--suite's seed set (its pins replayed first), or None; --episodes and --first-seed default to 10 and 1000."""
    from act_node.suites import replay_pins, suite

    if args.suite is None:
        args.episodes = 10 if args.episodes is None else args.episodes
        args.first_seed = 1000 if args.first_seed is None else args.first_seed
        return None
    if args.episodes is not None or args.first_seed is not None or args.ros:
        raise SystemExit("act-sim eval: --suite fixes the seeds and the object count: drop --episodes, --first-seed "
                         "(and --ros: the graph runs a range of seeds)")
    try:
        chosen = suite(args.suite)
    except ValueError as error:
        raise SystemExit(f"act-sim eval: --suite: {error}") from None
    problems = replay_pins(chosen)
    if problems:
        raise SystemExit(f"act-sim eval: the simulator no longer gives suite {chosen.label}'s episodes "
                         f"({'; '.join(problems)}): its results would not compare with earlier ones; a new version "
                         "of the suite (act_node/suites.py) pins the new episodes")
    args.episodes, args.first_seed, args.objects = len(chosen.seeds), chosen.seeds[0], chosen.objects
    print(f"act-sim eval: suite {chosen.label}: {chosen.about}; its {len(chosen.pins)} pinned episodes replay",
          file=sys.stderr)
    return chosen


def _given_cameras(config: GraphConfig, rename_map: dict | None) -> dict[str, str]:
    """{the checkpoint's camera: the sim's camera that feeds it}."""
    from act_node.evaluate import camera_names_given

    given = camera_names_given(rename_map or {})
    return {given.get(name, name): name for name in config.cameras}


def cameras_of_checkpoint(args: argparse.Namespace, checkpoint: str, rename_map: dict | None = None) -> None:
    """--cameras, --height and --width not given: the checkpoint's own (one size for every camera), its cameras fed
    by the sim's of the same name or the one `rename_map` names (lerobot-eval's --rename_map)."""
    from act_node.checkpoints import checkpoint_cameras
    from act_node.evaluate import sim_cameras_for

    if args.cameras is not None and args.height is not None and args.width is not None:
        return
    try:
        cameras = checkpoint_cameras(checkpoint)
        if cameras:
            cameras = dict(zip(sim_cameras_for(list(cameras), rename_map or {}), cameras.values()))
    except ValueError as error:
        raise SystemExit(f"act-sim: {error}") from None
    sizes = set(cameras.values())
    if not sizes:  # a checkpoint without cameras: the env renders its default ones, for the videos only
        cameras, sizes = dict.fromkeys(DEFAULT_CAMERAS), {TRAIN_IMAGE_SIZE}
    if len(sizes) != 1:
        raise SystemExit(f"act-sim: the checkpoint's cameras {cameras} differ in size; give --height and --width")
    height, width = sizes.pop()
    args.cameras = args.cameras if args.cameras is not None else ",".join(cameras)
    args.height = args.height if args.height is not None else height
    args.width = args.width if args.width is not None else width


def run_graph(arguments: dict[str, str], timeout_s: float | None = None) -> int:
    """Run the graph for these launch arguments as processes until the sim's episodes are done, a node
    fails, SIGINT or SIGTERM, or the timeout; stop every node; return the exit code (0: the episodes ran;
    see act_node.nodes.graph.run_processes)."""
    from act_node.nodes.graph import describe, run_processes

    return run_processes(describe(**arguments), timeout_s=timeout_s)


def show_launch_arguments() -> str:
    """Every name:=value argument with its description and default, as `ros2 launch --show-args` lists them."""
    from act_node.nodes.graph import LAUNCH_ARGUMENTS

    lines = ["Arguments (pass arguments as '<name>:=<value>'):", ""]
    for name, (default, description) in LAUNCH_ARGUMENTS.items():
        lines += [f"    '{name}':", f"        {description}", f"        (default: '{default}')", ""]
    return "\n".join(lines)


def cmd_launch(args: argparse.Namespace, extra: list[str]) -> None:
    if args.show_args:
        print(show_launch_arguments())
        return
    arguments = {}
    for item in extra:
        name, sep, value = item.partition(":=")
        if not sep:
            raise SystemExit(f"act-sim launch: arguments are name:=value, got {item!r}")
        arguments[name] = value
    try:
        code = run_graph(arguments, timeout_s=args.timeout)
    except ValueError as error:
        raise SystemExit(f"act-sim launch: {error}") from None
    raise SystemExit(code)


def cmd_ctl(_args: argparse.Namespace, extra: list[str]) -> None:
    from act_node.nodes.ctl import main as ctl

    raise SystemExit(ctl(extra))


def eval_over_ros(args: argparse.Namespace) -> None:
    import tempfile

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_dir = Path(tempfile.mkdtemp(prefix="ros_eval_", dir=out))
    # in-process evaluation has no velocity bound: none here either, so the two agree; and the sim waits for
    # the policy however slow the machine is (an hour), never holding for want of an action
    config = graph_config(args, policy="act", checkpoint=args.policy_path, clock="lockstep", episodes=args.episodes,
                          first_seed=args.first_seed, device=args.device, video_dir=str(results_dir),
                          record_video=False, replan_every=args.n_action_steps or 0, max_steps=args.max_steps,
                          merge=args.merge, rename_map=args.rename_map or "",
                          max_velocity=1e9, lockstep_timeout_s=3600.0, threads=1)
    code = run_graph(config.to_arguments())
    episodes = sorted((json.loads(p.read_text()) for p in results_dir.glob("*.json")), key=lambda e: e["seed"])
    if code != 0 or len(episodes) != args.episodes:
        raise SystemExit(f"act-sim eval --ros: the graph ended with code {code} after {len(episodes)} of "
                         f"{args.episodes} episodes")
    from act_node.evaluate import summarize

    report = {"policy": args.policy_path, "transport": "ros", **summarize(episodes), "per_episode": episodes}
    (out / "report_ros.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"over ROS: success {report['success_rate']:.1%} over {len(episodes)} episodes, mean reward "
          f"{report['mean_sum_reward']:.2f}, mean length {report['mean_episode_length']:.0f}; "
          f"{out / 'report_ros.json'}")


def add_env_arguments(parser: argparse.ArgumentParser, height: int | None = SIM_IMAGE_SIZE[0],
                      width: int | None = SIM_IMAGE_SIZE[1], cameras: str | None = ",".join(DEFAULT_CAMERAS),
                      scene=_TABLE_DEFAULT, scene_note: str = "") -> None:
    """The table-top's flags; a None default (the size, the cameras) means "the checkpoint's"; `scene`: the
    command's own default where it needs another than the table's, `scene_note` saying why."""
    graph_flag(parser, "--objects", "objects")
    theirs = "default: the checkpoint's"
    graph_flag(parser, "--cameras", "cameras", cameras, "" if cameras else theirs)
    graph_flag(parser, "--height", "image_height", height, f"default {height}" if height else theirs)
    graph_flag(parser, "--width", "image_width", width, f"default {width}" if width else theirs)
    graph_flag(parser, "--target", "target_source")
    graph_flag(parser, "--scene", "scene", scene, scene_note)
    graph_flag(parser, "--scene-reader", "scene_reader", metavar="DIR")
    graph_flag(parser, "--renderer", "renderer")


# act-sim record keeps the truth's target in the dataset by default: the recipes' datasets, the shipped
# checkpoints' among them, were recorded so, and a recipe run again records what it recorded then
RECORD_SCENE_NOTE = ("default for recording: sim, as the recipes' datasets were recorded; cameras records the "
                     "reader's targets, those a policy is given at run time")


def add_record_arguments(record: argparse.ArgumentParser) -> None:
    """act-sim record's flags (act-lab record adds its research ones to them)."""
    add_env_arguments(record, *TRAIN_IMAGE_SIZE, scene="sim", scene_note=RECORD_SCENE_NOTE)
    record.add_argument("--episodes", type=int, default=50, help="episodes to keep (the expert's successes)")
    graph_flag(record, "--first-seed", "first_seed", None, "default: 0, or with --resume the seed after those "
               "already tried")
    record.add_argument("--repo-id", default="local/act_node_pick", help="the dataset's repo_id (stays local)")
    record.add_argument("--root", default="outputs/datasets/act_node_pick", help="the dataset's folder")
    record.add_argument("--keep-failures", action="store_true", help="keep episodes the expert failed")
    record.add_argument("--environment-state", choices=ENV_LAYOUTS, default=None,
                        help="observation.environment_state's layout: target (10 numbers: the target's place and the "
                        "request; the default), target_tool (13: and the tool relative to the target, from the "
                        "joints), target_tool_yaw (15: and the requested object's yaw, read from the front and "
                        "wrist cameras by the yaw reader, models/yaw_reader) or target_tool_yaw_grasp (19: and the "
                        "grasp the expert's planner chooses for the scene at reset, act_node.grasp)")
    record.add_argument("--after-success-s", type=float, default=0.0,
                        help="seconds of the expert's plan recorded past the success (the rest of the lift, the "
                             "hold); the episode is kept only if the object is still up and held at their end")
    record.add_argument("--resume", action="store_true",
                        help="append --episodes more to the dataset at --root (same cameras, size, fps, objects)")
    record.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="record shards of seeds as Ray tasks and merge them in seed order: on a cluster started "
                        "here (no ADDRESS), the one `ray start` runs on this machine (auto) or at HOST:PORT")


def make_parser() -> argparse.ArgumentParser:
    """act-sim's parser: every subcommand and flag, each with its help."""
    parser = argparse.ArgumentParser(prog="act-sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    record = commands.add_parser("record", help="expert episodes in the sim as a LeRobotDataset (v3.0): the "
                                 "scripted expert drives, the dataset has the graph's features and units")
    add_record_arguments(record)
    record.set_defaults(run=cmd_record)

    train = commands.add_parser("train", help="lerobot-train with this task's ACT configuration; "
                                              "extra --key=value arguments go to lerobot-train")
    train.add_argument("--dataset-root", default="outputs/datasets/act_node_pick",
                       help="the LeRobotDataset's folder (act-sim record's --root, or the recorder node's record:=)")
    train.add_argument("--repo-id", default="local/act_node_pick", help="the dataset's repo_id (stays local)")
    train.add_argument("--output-dir", default="outputs/train/act_pick",
                       help="lerobot-train's output_dir: checkpoints/NNNNNN/pretrained_model")
    train.add_argument("--steps", type=int, default=2000, help="training steps")
    train.add_argument("--device", default="cpu", help="cpu or cuda")
    train.add_argument("--save-freq", type=int, default=None, help="checkpoint every N steps (default: at the end)")
    train.add_argument("--resume", action="store_true", help="continue the newest checkpoint in --output-dir up "
                       "to --steps")
    train.add_argument("--num-processes", type=int, default=1,
                       help="processes under accelerate launch: one a GPU with --device cuda (each takes its own "
                            "batch); on cpu, CPU processes (gloo)")
    train.add_argument("--main-process-port", type=int, default=None,
                       help="with --num-processes: the port the processes meet on (default 29500)")
    train.set_defaults(run=cmd_train, passes_extra=True)

    evaluate = commands.add_parser("eval", help="evaluate a LeRobot checkpoint in the table-top")
    add_env_arguments(evaluate, None, None, cameras=None)
    evaluate.add_argument("--policy.path", dest="policy_path", required=True, help="a pretrained_model folder")
    graph_flag(evaluate, "--episodes", "episodes", None, "default 10")
    graph_flag(evaluate, "--first-seed", "first_seed", None, "default 1000")
    evaluate.add_argument("--suite", default=None, metavar="NAME[@VERSION]",
                          help="a fixed, versioned seed set instead of --episodes and --first-seed: pick-4, pick-6, "
                          "pens-and-keys, cluttered (act_node/suites.py; the newest version unless @VERSION)")
    graph_flag(evaluate, "--max-steps", "max_steps")
    graph_flag(evaluate, "--n-action-steps", "replan_every", None, "default: the checkpoint's, 1 with temporal "
               "ensembling")
    graph_flag(evaluate, "--merge", "merge", note="in process and --ros alike: both run "
               "act_node.chunks.ChunkExecutor")
    graph_flag(evaluate, "--device", "device", note="cpu or cuda[:N]")
    evaluate.add_argument("--videos", type=int, default=2, help="film the first K episodes, and one episode of each "
                          "way an episode ended (0: film nothing)")
    evaluate.add_argument("--workers", type=int, default=1, help="parallel environments (processes)")
    evaluate.add_argument("--batch", type=int, default=16, help="episodes side by side in each process, one batched "
                          "policy call a tick over them (act_node.lockstep); an episode's result does not depend on it")
    evaluate.add_argument("--out", default="outputs/eval",
                          help="the folder for report.json, report.png, episodes.jsonl and the videos")
    evaluate.add_argument("--ros", action="store_true", help="drive the episodes through the ROS 2 graph")
    graph_flag(evaluate, "--rename_map", "rename_map", None, "keys as lerobot-eval's, {the env's key: the "
               "checkpoint's key}: '{\"observation.images.front\": \"observation.images.laptop\"}'", metavar="JSON")
    evaluate.add_argument("--resume", action="store_true", help="go on from the episodes OUT/episodes.jsonl holds "
                          "(each finished episode is written there), if they ran with these settings and weights")
    evaluate.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                          help="the episodes as Ray tasks instead of --workers: on a cluster started here (no "
                          "ADDRESS), the one `ray start` runs on this machine (auto) or at HOST:PORT")
    evaluate.set_defaults(run=cmd_eval)

    comparison = commands.add_parser("compare", help="two evaluations over the same seeds, seed by seed: the paired "
                                     "table and McNemar's exact p, by kind and by mode (compare.json, compare.png)")
    comparison.add_argument("a", help="act-sim eval's report.json (or its --out folder)")
    comparison.add_argument("b", help="the other report, over the same seeds")
    comparison.add_argument("--out", default="outputs/compare", help="the folder for compare.json and compare.png")
    comparison.set_defaults(run=cmd_compare)

    from act_node.nodes.graph import LAUNCH_ARGUMENTS

    launch = commands.add_parser(
        "launch", help="start the ROS 2 graph (arguments as name:=value)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The node graph of launch/sim.launch.py (robot:=so101: launch/so101.launch.py) as processes, "
                    "without the launch package: act-sim launch [name:=value ...]",
        epilog="name:=value arguments (--show-args describes each):\n  "
               + "\n  ".join(textwrap.wrap(", ".join(LAUNCH_ARGUMENTS), 100)))
    launch.add_argument("--show-args", action="store_true",
                        help="list every name:=value argument with its description and default, then exit")
    launch.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    launch.set_defaults(run=cmd_launch, passes_extra=True)

    ctl = commands.add_parser("ctl", add_help=False, help="what docs/arm.md asks of the ros2 CLI, without one: "
                              "stop | estop | reset | run TASK | end | record-start | record-stop | record-discard | "
                              "target X Y | bag OUT (act-sim ctl --help)")
    ctl.set_defaults(run=cmd_ctl, passes_extra=True)

    bags = commands.add_parser("bag2dataset", help="a rosbag2 bag (MCAP or sqlite3) of the graph to a LeRobotDataset")
    bags.add_argument("bag", help="the bag's folder (or file), as ros2 bag record wrote it")
    bags.add_argument("--out", required=True, help="the dataset folder (new, unless --resume)")
    bags.add_argument("--repo-id", default="local/act_node_demonstrations", help="the dataset's repo_id (stays local)")
    bags.add_argument("--resume", action="store_true", help="append to the dataset at --out")
    bags.add_argument("--cameras", default=",".join(DEFAULT_CAMERAS), help="comma-separated, as recorded")
    bags.add_argument("--fps", type=float, default=FPS, help="the rate of act/joint_command in the bag")
    bags.add_argument("--namespace", default="", help="the graph's namespace in the bag ('': the root)")
    bags.add_argument("--episode", action="append", default=None, metavar="START:END",
                      help="an episode as header-stamp seconds (repeat for more); default: the bag's episode topics")
    bags.add_argument("--task", default="", help="the task text of --episode ranges ('pick up the cup')")
    bags.add_argument("--keep-failures", action="store_true", help="keep the sim's failed episodes too")
    bags.add_argument("--no-target", action="store_true", help="no observation.environment_state (an arm's bag)")
    bags.add_argument("--environment-state", choices=JOINT_LAYOUTS, default=JOINT_LAYOUTS[0],
                      help="observation.environment_state's layout: target (10) or target_tool (13: and the tool "
                      "relative to the target, from the joints); target_tool_yaw is recorded by act-sim record")
    bags.add_argument("--robot-type", default="so101_sim", help="the dataset's robot_type")
    bags.add_argument("--frame-max-age", type=float, default=None, help="the oldest camera frame a command takes, in "
                      "the camera's periods (act_node.observation.FrameBounds); default: 3 with --episode (an arm's "
                      "cameras run on their own clocks), 0 otherwise (the sim's: the command's own stamp)")
    bags.add_argument("--camera-fps", type=float, nargs="+", help="each camera's frames a second, in --cameras' "
                      "order (default: --fps for all)")
    bags.set_defaults(run=cmd_bag2dataset)

    calibrate = commands.add_parser(
        "calibrate", help="the front camera's pose over the table from one image of a chessboard lying on it "
        "(OpenCV's PnP), for scene:=cameras on the arm", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Lay a printed chessboard flat on the table, its first inner corner at --board-origin (table "
                    "frame, metres), its rows along --board-yaw; take one image with the camera (--image, or "
                    "--device to grab one); the camera's pose in `table` goes to --out.\n"
                    "  act-sim calibrate --device /dev/video2 --fov-deg 60 --out calibration/front.json\n"
                    "  act-sim calibrate --sim      (the sim's front camera: solved and checked against its pose)")
    source = calibrate.add_mutually_exclusive_group(required=True)
    source.add_argument("--image", help="an image file of the board as the camera sees it")
    source.add_argument("--device", help="grab one frame from this OpenCV camera (index or /dev/videoN)")
    source.add_argument("--sim", action="store_true", help="the sim's front camera looking at a board drawn on "
                        "its table: the solve is compared with the camera's known pose")
    calibrate.add_argument("--board", default="7x4", help="inner corners COLSxROWS, one count odd and one even")
    calibrate.add_argument("--square-m", type=float, default=0.03, help="the board's square side, metres")
    calibrate.add_argument("--board-origin", default="0.41,0.14", help="X,Y of the first inner corner (the one "
                           "beside the dark corner square) in the table frame, metres")
    calibrate.add_argument("--board-yaw", type=float, default=0.0, help="the board's rows' direction, degrees from "
                           "the table's x axis")
    intrinsics = calibrate.add_mutually_exclusive_group()
    intrinsics.add_argument("--fov-deg", type=float, default=None, help="horizontal field of view of a pinhole "
                            "camera (as the camera node's horizontal_fov_deg; default 60, the sim: its own)")
    intrinsics.add_argument("--intrinsics", default=None, metavar="FX,FY,CX,CY",
                            help="the camera's K at the image's size, pixels (from a camera_info)")
    calibrate.add_argument("--out", default="outputs/calibration/front.json", help="the calibration file to write")
    calibrate.set_defaults(run=cmd_calibrate)

    return parser


def cmd_calibrate(args: argparse.Namespace) -> None:
    import numpy as np

    from act_node.perception.calibration import Board, calibrate_board, pinhole, pose_error, sim_board_image
    from act_node.perception.scene import CameraCalibration

    try:
        board = Board.parse(args.board, args.square_m, args.board_origin, args.board_yaw)
        if args.sim:
            image = sim_board_image(board)
        elif args.image:
            image = _read_image(Path(args.image))
        else:
            image = _grab_frame(args.device)
        height, width = image.shape[:2]
        if args.intrinsics:
            try:
                fx, fy, cx, cy = (float(v) for v in args.intrinsics.split(","))
            except ValueError:
                raise ValueError(f"--intrinsics {args.intrinsics!r} must be FX,FY,CX,CY pixels") from None
            k = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]])
        elif args.sim and args.fov_deg is None:
            k = CameraCalibration.of_sim(height, width).intrinsics
        else:
            k = pinhole(height, width, args.fov_deg or 60.0)
        calibration, rms = calibrate_board(image, k, board)
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(f"act-sim calibrate: {error}") from None
    about = {"board": args.board, "square_m": args.square_m, "board_origin": args.board_origin,
             "board_yaw_deg": args.board_yaw, "reprojection_rms_px": round(rms, 3),
             "source": "sim" if args.sim else (args.image or f"device {args.device}")}
    summary = {"camera_position_m": [round(v, 4) for v in calibration.position], **about}
    if args.sim:
        position_m, angle_deg = pose_error(calibration, CameraCalibration.of_sim(height, width))
        about.update(sim_position_error_m=round(position_m, 5), sim_rotation_error_deg=round(angle_deg, 4))
        summary.update(sim_position_error_m=about["sim_position_error_m"],
                       sim_rotation_error_deg=about["sim_rotation_error_deg"])
    calibration.save(Path(args.out), **about)
    print(json.dumps(summary))
    print(f"wrote {args.out}")


def _read_image(path: Path):
    import numpy as np
    from PIL import Image

    if not path.is_file():
        raise FileNotFoundError(f"image {path} does not exist")
    return np.asarray(Image.open(path).convert("RGB"))


def _grab_frame(device: str):
    import cv2

    capture = cv2.VideoCapture(int(device) if device.isdigit() else device)
    try:
        for _ in range(10):  # a camera's first frames are often dark while its exposure settles
            ok, frame = capture.read()
        if not capture.isOpened() or not ok:
            raise ValueError(f"camera {device!r} gave no frame")
        return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
    finally:
        capture.release()


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passes_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "passes_extra", False):
        args.run(args, extra)
    else:
        args.run(args)


if __name__ == "__main__":
    main()
