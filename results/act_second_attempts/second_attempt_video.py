"""A second attempt on film: the checkpoint acts from reset, misses the grasp, and the expert takes over from
there (act_lab.takeover, as `act-lab record --takeover-from` records it). A second strip under each frame says who
acts; the recording keeps only the expert's frames.

    .venv/bin/python results/act_second_attempts/second_attempt_video.py CHECKPOINT SEED OUT.mp4
"""
import sys
from pathlib import Path

from act_lab.takeover import Takeover
from act_node.episodes import run_episode
from act_node.tabletop.env import PickObjectEnv
from act_node.tabletop.expert import ScriptedExpert
from act_node.tabletop.video import caption, write_video

checkpoint, seed, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
env = PickObjectEnv(objects=4, cameras=("front", "wrist"), image_size=(240, 320))
takeover = Takeover.load(checkpoint, env)  # a checkpoint with cameras wants its own size: 96x128
agent, frames, actor = takeover.agent(env, ScriptedExpert(env)), [], []
result = run_episode(env, agent, seed, frames=frames, after_success=30,
                     on_step=lambda observation, action: actor.append(agent.expert_acting))
actor = [False, *actor]  # the first frame is the reset's
frames = [caption(frame, f"expert: second attempt ({agent.reason} at step {agent.took_over_at})" if expert
                  else f"policy: {checkpoint}") for frame, expert in zip(frames, actor)]
write_video(frames, out, env.fps)
print(f"{out}: seed {seed}, took over at {agent.took_over_at} ({agent.reason}); success {result.success}")
env.close()
