"""Bad input refused before anything moves, in one line naming what was wrong and what was expected: unknown launch
arguments (with the nearest known name), a task asking for no kind of the table-top, a missing checkpoint folder or
a run folder given for its pretrained_model, a task given to the sim; the arm's own refusal spoken of as the arm's;
`act-sim launch --show-args` describing every argument."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from arm_helpers import ROBOT_ID
from test_config import fake_checkpoint

from act_node.arm.servo_sim import SimulatedBus
from act_node.config import shipped_checkpoint
from act_node.nodes.graph import LAUNCH_ARGUMENTS, describe

ARM = {"robot": "so101", "port": "/dev/ttyACM0"}


def refusal(**arguments) -> str:
    with pytest.raises(ValueError) as caught:
        describe(**arguments)
    text = str(caught.value)
    assert "\n" not in text
    return text


def test_an_unknown_argument_is_named_with_the_nearest_and_every_known_one():
    text = refusal(dryrun="true", **ARM, policy="expert")
    assert text.startswith("unknown launch arguments: dryrun (did you mean dry_run?); known: ")
    known = text.split("; known: ")[1].split(" (")[0].split(", ")
    assert known == sorted(LAUNCH_ARGUMENTS)  # the arm's, the recorder's and the placement's too
    for name in ("dry_run", "port", "id", "task", "record", "teleop", "namespace", "checkpoint"):
        assert name in known
    assert "did you mean" not in refusal(zzz="1")


def test_a_task_naming_no_kind_is_refused_where_a_driver_needs_the_kind():
    banana = "task:='pick up the banana' asks for 'banana', which is no kind of the table-top: expected " \
             "'pick up the <kind>' with a kind among cube, ball, cup"
    assert refusal(**ARM, policy="expert", task="pick up the banana").startswith(banana)
    # the shipped checkpoint is fed the request (environment_state): the same refusal
    assert refusal(**ARM, checkpoint=shipped_checkpoint(), task="pick up the banana").startswith(banana)
    assert "does not read 'pick up the <kind>'" in refusal(**ARM, policy="expert", task="grab it")
    # the sim draws each episode's task from its seed: a task given there is refused, not silently replaced
    assert "is robot:=so101's: the sim draws each episode's task from its seed" in refusal(
        policy="expert", task="pick up the banana")
    describe(**ARM, policy="expert", task="pick up the box")  # a kind it knows


def test_a_policy_not_fed_the_request_and_a_teleoperated_recording_take_any_task_text(tmp_path):
    cameras_only = fake_checkpoint(tmp_path / "camera_act", cameras=("front", "wrist"))
    describe(**ARM, checkpoint=str(cameras_only), task="stack the red block on the blue one")
    describe(**ARM, teleop="leader", leader_port="/dev/ttyACM1", record=str(tmp_path / "data"),
             task="stack the red block on the blue one")


def test_without_a_task_the_arms_policy_waits_for_a_run_instead_of_starting_one(tmp_path):
    model = fake_checkpoint(tmp_path / "model", cameras=("front", "wrist"))
    policy = describe(**ARM, checkpoint=str(model))[-1]
    assert policy.name == "act_policy" and policy.parameters["run_on_start"] is False
    started = describe(**ARM, checkpoint=str(model), task="pick up the cup")[-1]
    assert started.parameters["run_on_start"] is True and started.parameters["task"] == "pick up the cup"


def test_a_missing_checkpoint_or_a_run_folder_is_refused_naming_the_folder_expected(tmp_path):
    missing = refusal(**ARM, checkpoint=str(tmp_path / "nowhere"))
    assert missing.startswith(f"checkpoint:={tmp_path / 'nowhere'}: no such folder; expected a LeRobot "
                              "pretrained_model folder")
    run = tmp_path / "train" / "act_pick"
    fake_checkpoint(run / "checkpoints" / "last" / "pretrained_model")
    text = refusal(**ARM, checkpoint=str(run))
    assert text == (f"checkpoint:={run} is not a pretrained_model folder (no config.json) but holds one: give "
                    f"checkpoint:={run / 'checkpoints' / 'last' / 'pretrained_model'}")
    step = run / "checkpoints" / "000010"
    fake_checkpoint(step / "pretrained_model")
    assert refusal(checkpoint=str(step)).endswith(f"give checkpoint:={step / 'pretrained_model'}")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no config.json; expected a LeRobot pretrained_model folder" in refusal(checkpoint=str(empty))
    # the same folder check where a checkpoint is loaded (act-sim eval, the policy node run by hand)
    from act_node.policy import ChunkPolicy

    with pytest.raises(FileNotFoundError, match="give checkpoint .*checkpoints/last/pretrained_model"):
        ChunkPolicy.load(run)


def test_show_args_lists_every_launch_argument_with_its_description_and_default():
    result = subprocess.run([sys.executable, "-m", "act_node.cli", "launch", "--show-args"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for name, (default, description) in LAUNCH_ARGUMENTS.items():
        assert f"    '{name}':\n        {description}\n        (default: '{default}')" in result.stdout
    helped = subprocess.run([sys.executable, "-m", "act_node.cli", "launch", "--help"], capture_output=True,
                            text=True, timeout=120)
    listed = helped.stdout.split("name:=value arguments")[1]
    assert all(name in listed for name in LAUNCH_ARGUMENTS) and "--show-args" in helped.stdout


def test_the_arms_refusal_is_said_as_the_arms_not_the_sims(tmp_path):
    """No calibration file: the arm node refuses (exit 2) and act-sim launch says the arm refused to start."""
    from act_node.arm.calibration import so101_calibration

    with SimulatedBus(so101_calibration()) as bus:
        result = subprocess.run([sys.executable, "-m", "act_node.cli", "launch", "robot:=so101", f"port:={bus.port}",
                                 f"id:={ROBOT_ID}", f"calibration_dir:={tmp_path}", "policy:=expert"],
                                capture_output=True, text=True, timeout=180)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "act-sim launch: the arm node act_so101 exited with code 2: it refused to start" in result.stderr
    assert "sim node" not in result.stderr and "episodes" not in result.stderr
    assert json.dumps(ROBOT_ID)[1:-1] in result.stderr  # the reason names the missing file
