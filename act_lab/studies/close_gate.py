"""A close on what the policy sees (issue 45): the jaws may not close while the tool is above the grasp height.

    python -m act_lab.studies.close_gate eval CHECKPOINT OUT [--margin-m M] [act-sim eval's flags]

The commonest failure of the shipped policy holds the object without lifting it: it closes with the tool centre
point about 4 cm from the object's grasp point where a success closes at about 2.4 (results/act_levers). ACT closes
on the expert's schedule, whether the tool got down or not. This study runs a checkpoint of the target_tool
layouts under `act-sim eval` with one rule between the policy and the arm: while the tool's height (environment
state's tcp_z, forward kinematics of the joints) is more than M above where the expert puts the tool for the
requested kind (its one-hot in the same state; act_node.tabletop.planner's grasp height), a gripper command that
would close the jaws further than they are is replaced by where they are. Opening, and every other joint, pass as
the policy sent them. Everything the rule reads is in the policy's own observation: no simulator truth.

It runs in one process, one episode at a time (the rule wraps the in-process env). The report is act-sim eval's;
`act-sim compare` pairs it with the same checkpoint's run without the rule.
"""

from __future__ import annotations

import sys

import numpy as np

from act_node.table_frame import KIND_NAMES, TOOL_NAMES, environment_state_names
from act_node.tabletop.objects import KINDS
from act_node.tabletop.planner import JAW_BELOW_TCP_M, TIP_ABOVE_TABLE_M

GRIPPER = 5  # the gripper's index in the action and agent_pos (LeRobot's 0-100, 0 closed)
MARGIN_M = 0.015


def grasp_tcp_z(kind: str) -> float:
    """Where the expert's plan puts the tool centre point to close on `kind` (act_node.tabletop.planner)."""
    return max(KINDS[kind].grasp_height_m, JAW_BELOW_TCP_M + TIP_ABOVE_TABLE_M)


def gated(action: np.ndarray, observation: dict, layout: str, margin_m: float = MARGIN_M) -> tuple[np.ndarray, bool]:
    """(the action to execute, whether the rule holds the jaws) for the policy's `action` on `observation`; the
    rule only applies until the tool first comes down (with_gate latches it off then, so the lift may close on)."""
    names = environment_state_names(layout)
    state = np.asarray(observation["environment_state"], dtype=np.float64)
    one_hot = state[names.index(f"request_{KIND_NAMES[0]}"):][:len(KIND_NAMES)]
    if not np.isclose(one_hot.sum(), 1.0):
        raise ValueError(f"environment_state's request is not one-hot: {one_hot}")
    jaws = float(observation["agent_pos"][GRIPPER])
    action = np.array(action, dtype=np.float64)
    if not came_down(observation, layout, margin_m) and action[GRIPPER] < jaws:
        action[GRIPPER] = jaws
        return action, True
    return action, False


def came_down(observation: dict, layout: str, margin_m: float = MARGIN_M) -> bool:
    """Whether the tool is within `margin_m` of the requested kind's grasp height (or below it)."""
    names = environment_state_names(layout)
    state = np.asarray(observation["environment_state"], dtype=np.float64)
    one_hot = state[names.index(f"request_{KIND_NAMES[0]}"):][:len(KIND_NAMES)]
    kind = KIND_NAMES[int(np.argmax(one_hot))]
    return bool(state[names.index(TOOL_NAMES[2])] <= grasp_tcp_z(kind) + margin_m)


def with_gate(env, margin_m: float):
    """`env` whose act() applies the rule to the observation it last gave; env.gated_ticks counts the changes."""
    reset, observe, act = env.reset, env.observe, env.act
    latest: list[dict] = []

    def keep(observation):
        latest[:] = [observation]
        return observation

    def reset_and_keep(*args, **kwargs):
        if env.gated_ticks:
            print(f"close gate: held the jaws open on {env.gated_ticks} ticks of the last episode", file=sys.stderr,
                  flush=True)
        observation, info = reset(*args, **kwargs)
        env.gated_ticks, env.tool_came_down = 0, False
        return keep(observation), info

    def observe_and_keep(render: bool = True):
        return keep(observe(render))

    def gated_act(action):
        if not latest:
            raise RuntimeError("the close gate reads the last observation: reset the env first")
        if not env.tool_came_down:
            action, held = gated(action, latest[0], env.environment_layout, margin_m)
            env.gated_ticks += held
            env.tool_came_down = came_down(latest[0], env.environment_layout, margin_m)
        return act(action)

    env.reset, env.observe, env.act = reset_and_keep, observe_and_keep, gated_act
    env.gated_ticks, env.tool_came_down = 0, False
    env.step = lambda action: _step(env, action)
    return env


def _step(env, action):
    reward, terminated, truncated, info = env.act(action)
    return env.observe(), reward, terminated, truncated, info


def evaluate(argv: list[str]) -> None:
    from act_node import cli
    from act_node import evaluate as evaluation

    margin_m = MARGIN_M
    if "--margin-m" in argv:
        at = argv.index("--margin-m")
        margin_m = float(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    make_env = evaluation.make_env

    def make_gated_env(config):
        env = make_env(config)
        if env.environment_layout not in ("target_tool", "target_tool_yaw"):
            raise SystemExit(f"close_gate reads the tool's height: a checkpoint of the target_tool layouts, not "
                             f"{env.environment_layout}")
        return with_gate(env, margin_m)

    evaluation.make_env = make_gated_env
    evaluation.make_envs = lambda config, count, envs=None: [make_gated_env(config)]
    checkpoint, out, *rest = argv
    if any(arg.startswith(("--workers", "--batch", "--ray", "--ros")) for arg in rest):
        raise SystemExit("close_gate.py eval runs in one process, one episode at a time (workers, lockstep slots and "
                         "the graph would build the env without the rule)")
    cli.main(["eval", "--policy.path", checkpoint, "--out", out, "--videos", "0", "--workers", "1", "--batch", "1",
              *rest])


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "eval":
        evaluate(sys.argv[2:])
    else:
        raise SystemExit(__doc__.split("\n\n")[1])
