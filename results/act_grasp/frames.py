"""The front and wrist cameras (240x320) at the tick the jaws start to close, a checkpoint's and the expert's on the
same seed, one above the other with a caption each (closure.py's tick: the gripper command below 10).

    .venv/bin/python results/act_grasp/frames.py --policy.path models/act_target_tool_yaw --seed 2101 \
        --out results/act_grasp/held_up_ball_seed2101.png
"""
import argparse
from pathlib import Path

import numpy as np
from PIL import Image

from act_node.config import GraphConfig
from act_node.episodes import checkpoint_agent
from act_node.evaluate import load_policy, make_env
from act_node.tabletop.expert import ScriptedExpert
from act_node.tabletop.video import caption

CLOSING = 10.0

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--policy.path", dest="policy_path", required=True)
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--objects", type=int, default=4)
parser.add_argument("--out", type=Path, required=True)
args = parser.parse_args()

config = GraphConfig(checkpoint=args.policy_path, objects=args.objects)
policy = load_policy(config.replace(cameras=("front", "wrist")))
env = make_env(config.replace(cameras=("front", "wrist"), image_height=240, image_width=320))
rows = []
for who in ("policy", "expert"):
    observation, _ = env.reset(seed=args.seed)
    agent = checkpoint_agent(env, policy) if who == "policy" else ScriptedExpert(env)
    agent.reset(observation)
    for tick in range(env.max_steps):
        action = agent.act(observation)
        env.act(action)
        if action[5] < CLOSING:
            env.observe()
            tcp, _ = env.table.robot.link_pose("tcp")
            height = 1000 * (tcp[2] - env.table.task.scene.target.kind.grasp_height_m)
            name = Path(args.policy_path).name if who == "policy" else "the expert"
            rows.append(caption(env.render(), f"{name}, seed {args.seed} ({env.task}): tick {tick}, the jaws "
                                              f"start to close, tcp {height:.0f} mm above the grasp height"))
            break
        if agent.needs_observation():
            observation = env.observe()
env.close()
args.out.parent.mkdir(parents=True, exist_ok=True)
Image.fromarray(np.concatenate(rows, axis=0)).save(args.out)
print(f"wrote {args.out}")
