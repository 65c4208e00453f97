"""Where a checkpoint's jaws are when they close. For each seed, at the first tick its gripper command falls
below CLOSING (the expert's close ramp passes it 2-3 ticks in):
- the tool centre point's height above the requested object's grasp height;
- the height the arm was commanded to (forward kinematics of the same action);
- how far the tcp stands from the object's centre;
- how far the direction to that centre turns from the jaws' closing axis (near 0 in the planner's grasps: the
  fixed jaw's face is on the tcp, the object beyond it across the jaws).
A tcp well above where it was sent is an arm that was sent down and did not get there: a jaw stands on the object.

    .venv/bin/python results/act_grasp/closure.py run --policy.path models/act_target_tool_yaw \
        --first-seed 2100 --episodes 100 --out results/act_grasp/closure_yaw_2100_100.json
    .venv/bin/python results/act_grasp/closure.py run --expert --first-seed 2100 --episodes 100 --out ...
    .venv/bin/python results/act_grasp/closure.py figure A.json [B.json ...] --out results/act_grasp/closure.png
"""
import argparse
import json
from pathlib import Path

import numpy as np
from tqdm import tqdm

CLOSING = 10.0  # gripper command (0-100): the jaws are closing
BLOCKED_M = 0.01  # the tcp this far above where it was sent: held up


def run(args) -> None:
    from act_node import so101
    from act_node.config import GraphConfig
    from act_node.description import tool_point
    from act_node.episodes import checkpoint_agent
    from act_node.evaluate import load_policy, make_env
    from act_node.tabletop.expert import ScriptedExpert
    from act_node.tabletop.kinematics import closing_axis_yaw
    from act_node.tabletop.world import ARM_BASE_YAW

    config = GraphConfig(checkpoint=args.policy_path or "", objects=args.objects)
    env = make_env(config.replace(cameras=("front", "wrist")) if args.policy_path else config)
    policy = load_policy(config.replace(cameras=("front", "wrist"))) if args.policy_path else None
    episodes = []
    for seed in tqdm(range(args.first_seed, args.first_seed + args.episodes), desc="episodes"):
        observation, _ = env.reset(seed=seed)
        agent = checkpoint_agent(env, policy) if policy else ScriptedExpert(env)
        agent.reset(observation)
        task = env.table.task
        grasp_z = task.scene.target.kind.grasp_height_m
        closure, success = None, False
        for tick in range(env.max_steps):
            action = agent.act(observation)
            _, terminated, truncated, _ = env.act(action)
            if closure is None and action[5] < CLOSING:
                tcp, _ = env.table.robot.link_pose("tcp")
                centre, _ = task.target_pose()
                commanded = tool_point(so101.from_lerobot(action))
                # the moving jaw closes from the fixed jaw's face (on the tcp) toward this side: the object's
                # centre lies that way from the tcp in a grasp the planner makes
                side = closing_axis_yaw(env.table.robot.joint_positions()) + ARM_BASE_YAW
                toward = np.arctan2(*(centre[:2] - tcp[:2])[::-1])
                closure = {"tick": tick, "tcp_above_grasp_m": round(float(tcp[2] - grasp_z), 4),
                           "commanded_above_grasp_m": round(float(commanded[2] - grasp_z), 4),
                           "tcp_from_centre_m": round(float(np.hypot(*(tcp[:2] - centre[:2]))), 4),
                           "centre_off_the_jaws_axis_deg": round(float(np.degrees(abs(
                               (toward - side + np.pi) % (2 * np.pi) - np.pi))), 1)}
            if agent.needs_observation():
                observation = env.observe()
            if terminated or truncated:
                success = bool(terminated)
                break
        episodes.append({"seed": seed, "kind": task.scene.target.kind.name, "success": success, "closure": closure})
    env.close()
    report = {"policy": args.policy_path or "expert", "objects": args.objects, "episodes": episodes,
              "summary": summarize(episodes)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report["summary"], indent=1))


def blocked(episode: dict) -> bool:
    c = episode["closure"]
    return c is not None and c["tcp_above_grasp_m"] - c["commanded_above_grasp_m"] > BLOCKED_M


def summarize(episodes: list[dict]) -> dict:
    failed = [e for e in episodes if not e["success"]]
    by_kind = {}
    for kind in sorted({e["kind"] for e in episodes}):
        mine = [e for e in episodes if e["kind"] == kind]
        by_kind[kind] = (f"{sum(e['success'] for e in mine)}/{len(mine)} succeed, "
                         f"{sum(blocked(e) for e in mine)} held up at the close")
    return {"episodes": len(episodes), "successes": len(episodes) - len(failed),
            "held_up_at_the_close": sum(blocked(e) for e in episodes),
            "failures_held_up_at_the_close": sum(blocked(e) for e in failed),
            "successes_held_up_at_the_close": sum(blocked(e) for e in episodes if e["success"]),
            "never_closed": sum(e["closure"] is None for e in episodes),
            "median_centre_off_the_jaws_axis_deg": {
                "successes": _median([e for e in episodes if e["success"]]),
                "failures_held_up": _median([e for e in failed if blocked(e)]),
                "failures_not_held_up": _median([e for e in failed if e["closure"] and not blocked(e)])},
            "by_kind": by_kind}


def _median(episodes: list[dict]) -> float | None:
    values = [e["closure"]["centre_off_the_jaws_axis_deg"] for e in episodes if e["closure"]]
    return round(float(np.median(values)), 1) if values else None


def figure(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reports = [json.loads(Path(p).read_text()) for p in args.reports]
    labels = args.labels.split("|") if args.labels else [
        "the expert" if r["policy"] == "expert" else Path(r["policy"]).name for r in reports]
    if len(labels) != len(reports):
        raise SystemExit(f"--labels has {len(labels)} entries for {len(reports)} reports")
    columns = min(2, len(reports))
    rows = (len(reports) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(5.6 * columns, 4.4 * rows), sharex=True, sharey=True,
                             squeeze=False)
    for ax in axes.flat[len(reports):]:
        ax.set_visible(False)
    for ax, report, label in zip(axes.flat, reports, labels):
        for success, colour, outcome in ((True, "tab:green", "success"), (False, "tab:red", "failure")):
            points = np.array([[e["closure"]["commanded_above_grasp_m"], e["closure"]["tcp_above_grasp_m"]]
                               for e in report["episodes"] if e["closure"] and e["success"] == success]) * 1000
            if len(points):
                ax.scatter(points[:, 0], points[:, 1], s=14, c=colour, alpha=0.7,
                           label=f"{outcome} ({len(points)})")
        ax.plot([-15, 25], [-15, 25], "k:", lw=0.8)
        ax.plot([-15, 25], [-5, 35], color="grey", lw=0.6, ls="--")
        ax.set_xlim(-15, 25)
        ax.set_ylim(-15, 60)
        s = report["summary"]
        ax.set_title(f"{label}\n{s['successes']}/{s['episodes']} succeed; {s['held_up_at_the_close']} held up at the "
                     "close", fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
    for ax in axes[-1]:
        ax.set_xlabel("commanded tcp height above the grasp height (mm)")
    for ax in axes[:, 0]:
        ax.set_ylabel("tcp height above the grasp height (mm)\nwhen the jaws start to close")
    fig.suptitle("Above the dashed line: the arm was sent down and a jaw stood on the object", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
commands = parser.add_subparsers(dest="command", required=True)
one = commands.add_parser("run")
one.add_argument("--policy.path", dest="policy_path", default=None)
one.add_argument("--expert", action="store_true", help="the scripted expert instead of a checkpoint")
one.add_argument("--first-seed", type=int, default=2100)
one.add_argument("--episodes", type=int, default=100)
one.add_argument("--objects", type=int, default=4)
one.add_argument("--out", type=Path, required=True)
draw = commands.add_parser("figure")
draw.add_argument("reports", nargs="+")
draw.add_argument("--labels", default="", help="a title for each report, |-separated (default: the checkpoint)")
draw.add_argument("--out", type=Path, required=True)
parsed = parser.parse_args()
if parsed.command == "run" and bool(parsed.policy_path) == parsed.expert:
    parser.error("run takes --policy.path or --expert (one of them)")
run(parsed) if parsed.command == "run" else figure(parsed)
