"""Record -> LeRobotDataset -> lerobot-train -> evaluate, on tiny data; and clear refusals."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_ACT, TINY_IMAGE

from act_node.config import GraphConfig
from act_node.evaluate import evaluate, wilson_interval
from act_node.policy import CheckpointMismatch, ChunkPolicy, FeatureSpec
from act_node.record import JOINT_FEATURE_NAMES


def test_recorded_episodes_load_as_a_lerobot_dataset(tiny_dataset):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("local/act_node_pick", root=tiny_dataset, video_backend="pyav")
    assert dataset.num_episodes == 2 and dataset.fps == 30
    assert dataset.meta.info.codebase_version == "v3.0"
    assert dataset.features["observation.state"]["names"] == JOINT_FEATURE_NAMES
    frame = dataset[10]
    assert tuple(frame["observation.images.front"].shape) == (3, *TINY_IMAGE)
    assert tuple(frame["observation.images.wrist"].shape) == (3, *TINY_IMAGE)
    assert frame["observation.state"].shape == (6,) and frame["action"].shape == (6,)
    assert frame["task"].startswith("pick up the ")
    # the action is the expert's joint target, in the same units as the state: within the joint ranges
    actions = np.stack([dataset[i]["action"].numpy() for i in range(0, dataset.num_frames, 7)])
    assert np.all(np.abs(actions[:, :5]) <= 165) and np.all((actions[:, 5] >= 0) & (actions[:, 5] <= 100))


def tiny_dataset_root(checkpoint):
    from pathlib import Path

    from act_node.checkpoints import training_dataset_root

    return Path(training_dataset_root(checkpoint))



def test_an_evaluation_cut_short_goes_on_from_its_finished_episodes(tiny_checkpoint, tmp_path, monkeypatch):
    import act_node.evaluate as evaluation

    config = GraphConfig(policy="act", checkpoint=str(tiny_checkpoint), episodes=3, first_seed=1000, objects=2,
                         image_height=TINY_IMAGE[0], image_width=TINY_IMAGE[1], max_steps=12)
    ran: list[int] = []
    run_many = evaluation.lockstep

    def counted(envs, policy, seeds, *args, **kwargs):
        ran.extend(seeds)
        return run_many(envs, policy, seeds, *args, **kwargs)

    monkeypatch.setattr(evaluation, "lockstep", counted)
    whole = evaluate(config, out=tmp_path / "whole", videos=1)
    out = tmp_path / "cut"
    evaluate(config.replace(episodes=2), out=out, videos=1)  # seeds 1000 (filmed) and 1001, then "killed"
    journal = out / "episodes.jsonl"

    def journalled():
        return [(json.loads(line).get("episode") or {}).get("seed") for line in journal.read_text().splitlines()]

    assert journalled() == [None, 1000, 1001]
    with open(journal, "a") as torn:
        torn.write('{"episode": {"seed": 1002, "succ')  # a kill mid-write
    ran.clear()
    resumed = evaluate(config, out=out, videos=1, resume=True)
    assert ran == [1002] and resumed["resumed_episodes"] == 2 and journalled() == [None, 1000, 1001, 1002]

    def outcome(report):
        return [{k: v for k, v in e.items() if k != "mean_inference_s"} for e in report["per_episode"]]

    assert outcome(resumed) == outcome(whole) and resumed["success_rate"] == whole["success_rate"]
    assert resumed["mean_sum_reward"] == whole["mean_sum_reward"]
    assert resumed["videos"] == [str(out / "episode_seed1000.mp4")]
    assert json.loads((out / "report.json").read_text())["episodes"] == 3
    ran.clear()  # seeds 1001-1002 of the journal, 1003 anew; 1000, outside the range, neither run nor reported
    later = evaluate(config.replace(first_seed=1001), out=out, videos=0, resume=True)
    assert ran == [1003] and [e["seed"] for e in later["per_episode"]] == [1001, 1002, 1003]
    (out / "episode_seed1000.mp4").unlink()  # a filmed seed without its video is filmed again
    ran.clear()
    assert evaluate(config, out=out, videos=1, resume=True)["resumed_episodes"] == 2 and ran == [1000]
    ran.clear()
    evaluate(config, out=out, videos=0)  # without --resume: every episode anew, none filmed
    assert ran == [1000, 1001, 1002]
    (out / "episode_seed1001.mp4").write_bytes(b"another run's video")
    ran.clear()  # 1001 was journalled unfilmed: a video lying there is not its own
    assert evaluate(config, out=out, videos=2, resume=True)["resumed_episodes"] == 1 and ran == [1000, 1001]
    ran.clear()
    other = config.replace(max_steps=11)  # other settings: the journal is not theirs
    assert evaluate(other, out=out, videos=0, resume=True)["resumed_episodes"] == 0 and ran == [1000, 1001, 1002]
    header = json.loads(journal.read_text().splitlines()[0])["journal"]
    assert header["checkpoint"] == evaluation.folder_digest(tiny_checkpoint) and header["env"]["max_steps"] == 11
    lines = journal.read_text().splitlines()
    header["checkpoint"] = "0" * 64  # another checkpoint (a new average in the same folder): anew
    journal.write_text("\n".join([json.dumps({"journal": header}), *lines[1:]]) + "\n")
    ran.clear()
    assert evaluate(other, out=out, videos=0, resume=True)["resumed_episodes"] == 0 and ran == [1000, 1001, 1002]
    parallel = evaluate(other.replace(episodes=5), out=out, videos=0, workers=2, resume=True)  # two workers: 2 more
    assert parallel["resumed_episodes"] == 3 and journalled() == [None, 1000, 1001, 1002, 1003, 1004]
    assert outcome(parallel)[:3] == outcome(evaluate(other, out=tmp_path / "other", videos=0))
    from act_node import cli

    with pytest.raises(SystemExit, match="--resume goes on from an in-process"):  # the graph journals nothing
        cli.main(["eval", "--policy.path", str(tiny_checkpoint), "--ros", "--resume", "--out", str(out)])


def test_a_checkpoint_digest_covers_every_file_but_the_card(tiny_checkpoint, tmp_path):
    import shutil

    from act_node.evaluate import folder_digest

    copy = tmp_path / "copy"
    shutil.copytree(tiny_checkpoint, copy)
    digest = folder_digest(copy)
    assert digest == folder_digest(tiny_checkpoint)
    (copy / "README.md").write_text("a card says nothing the episodes depend on")
    assert folder_digest(copy) == digest
    processor = next(copy.glob("policy_preprocessor_step_*_normalizer_processor.safetensors"))
    processor.write_bytes(processor.read_bytes() + b" ")  # the normalizer's statistics decide the actions too
    assert folder_digest(copy) != digest


def test_the_checkpoint_answers_a_whole_chunk(tiny_checkpoint):
    from act_node.tabletop.env import PickObjectEnv

    policy = ChunkPolicy.load(tiny_checkpoint, expect=FeatureSpec(cameras={"front": TINY_IMAGE, "wrist": TINY_IMAGE}))
    env = PickObjectEnv(objects=2, image_size=TINY_IMAGE)
    observation, _ = env.reset(seed=5)
    chunk, seconds = policy(observation, env.task)
    env.close()
    assert chunk.shape == (20, 6) and chunk.dtype == np.float32 and np.all(np.isfinite(chunk))
    assert seconds > 0


def test_evaluation_reports_success_rate_interval_rewards_and_videos(tiny_checkpoint, tmp_path):
    config = GraphConfig(policy="act", checkpoint=str(tiny_checkpoint), episodes=2, first_seed=1000, objects=2,
                         image_height=TINY_IMAGE[0], image_width=TINY_IMAGE[1], max_steps=25)
    report = evaluate(config, out=tmp_path / "eval", videos=1)
    saved = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert saved["episodes"] == report["episodes"] == 2
    assert [e["seed"] for e in saved["per_episode"]] == [1000, 1001]
    assert all(e["steps"] == 25 for e in saved["per_episode"])  # 3 training steps: no success, full length
    assert saved["success_rate"] == 0.0 and saved["success_ci95"] == pytest.approx(list(wilson_interval(0, 2)))
    assert saved["n_action_steps"] == 10
    # renderer auto: the checkpoint's dataset was drawn with TinyRenderer (PickObjectEnv's default), so is this
    assert saved["renderer"] == "tiny" and json.loads((tiny_checkpoint / "act_node_renderer.json").read_text()) \
        == json.loads((tiny_dataset_root(tiny_checkpoint) / "meta" / "act_node_renderer.json").read_text()) \
        == {"renderer": "tiny"}  # act-sim train copied the dataset's record into the checkpoint
    assert all(e["policy_calls"] == 3 for e in saved["per_episode"])  # 25 steps, 10 per chunk
    assert (tmp_path / "eval" / "episode_seed1000.mp4").stat().st_size > 1000
    # why each ended: one mode an episode, each mode that occurred filmed once, the page drawn
    assert sum(row["count"] for row in saved["outcomes"].values()) == 2
    assert set(saved["outcome_videos"]) == {e["outcome"] for e in saved["per_episode"]} == set(saved["outcome_stills"])
    assert all((tmp_path / "eval" / Path(v).name).is_file() for v in saved["outcome_videos"].values())
    assert (tmp_path / "eval" / "report.png").stat().st_size > 10000
    assert saved["selector_misses"] == 0 and saved["max_target_error_m"] < 0.01
    assert all(e["selector_found"] and e["clamped_joints"] >= 0 for e in saved["per_episode"])
    in_parallel = evaluate(config, out=tmp_path / "parallel", videos=0, workers=2)  # two workers, one episode each
    for serial, parallel in zip(report["per_episode"], in_parallel["per_episode"], strict=True):
        keys = ("seed", "task", "success", "steps", "policy_calls", "clamped_joints", "target_error_m")
        assert [parallel[k] for k in keys] == [serial[k] for k in keys]
        assert parallel["sum_reward"] == serial["sum_reward"]  # one torch thread either way: the same arithmetic
    assert all(e["lifted"] == [] for e in report["per_episode"]) and report["picked_other"] == 0
    assert all(0.0 <= e["max_reward"] <= 0.3 for e in report["per_episode"]) and report["grasp_rate"] == 0.0


def test_wilson_interval_matches_known_values():
    low, high = wilson_interval(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    # the interval holds the rate for every count: 0 of 16 gave a low bound of 2.8e-17, and the report's picture
    # then failed on a negative error bar
    for total in range(1, 300):
        for count in range(total + 1):
            low, high = wilson_interval(count, total)
            assert 0.0 <= low <= count / total <= high <= 1.0, (count, total, low, high)
    assert wilson_interval(0, 16)[0] == 0.0 and wilson_interval(6, 6)[1] == 1.0


def test_mismatched_checkpoint_is_refused_with_every_mismatch_listed(tiny_checkpoint):
    with pytest.raises(CheckpointMismatch) as refused:
        ChunkPolicy.load(tiny_checkpoint, expect=FeatureSpec(cameras={"front": (96, 128), "top": TINY_IMAGE},
                                                             state_dim=7))
    message = str(refused.value)
    assert "observation.images.front: the checkpoint wants images (3, 48, 64)" in message
    assert "fed (3, 96, 128)" in message
    assert "the checkpoint wants camera 'observation.images.wrist', which is not fed" in message
    assert "camera 'observation.images.top' is fed but the checkpoint has no such input" in message
    assert "observation.state: the checkpoint wants shape (6,), fed (7,)" in message


def test_eval_command_refuses_a_mismatch_without_a_traceback(tiny_checkpoint, tmp_path):
    result = subprocess.run([sys.executable, "-m", "act_node.cli", "eval", f"--policy.path={tiny_checkpoint}",
                             "--cameras=front", "--height=48", "--width=64", "--episodes=1",
                             f"--out={tmp_path}"], capture_output=True, text=True)
    assert result.returncode != 0
    assert "the checkpoint wants camera 'observation.images.wrist', which is not fed" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_folder_that_is_no_checkpoint_gets_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no config.json; expected a LeRobot pretrained_model folder"):
        ChunkPolicy.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="nowhere: no such folder; expected a LeRobot pretrained_model"):
        ChunkPolicy.load(tmp_path / "nowhere")
    model = tmp_path / "run" / "checkpoints" / "last" / "pretrained_model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="run is not a pretrained_model folder .* give checkpoint "
                                                ".*/run/checkpoints/last/pretrained_model$"):
        ChunkPolicy.load(tmp_path / "run")


def test_lerobot_eval_runs_in_this_env(tiny_checkpoint, tmp_path):
    out = tmp_path / "lerobot_eval"
    result = subprocess.run(
        [sys.executable, "-m", "lerobot.scripts.lerobot_eval", "--env.type=act_node_pick",
         f"--policy.path={tiny_checkpoint}", "--env.observation_height=48", "--env.observation_width=64",
         "--env.objects=2", "--env.episode_length=15", "--eval.n_episodes=1", "--eval.batch_size=1",
         "--policy.device=cpu", f"--output_dir={out}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads((out / "eval_info.json").read_text())
    assert info["overall"]["n_episodes"] == 1


def test_skipping_the_cameras_between_replans_changes_no_result(tiny_checkpoint):
    """The in-process rollout renders only at re-plan ticks; rendering every tick gives the same episode."""
    from act_node.evaluate import evaluate_episode
    from act_node.tabletop.env import PickObjectEnv

    policy = ChunkPolicy.load(tiny_checkpoint)
    env = PickObjectEnv(objects=2, image_size=TINY_IMAGE, max_steps=25)
    renders = []
    observe = env.observe
    env.observe = lambda **kwargs: renders.append(env.steps) or observe(**kwargs)
    skipping = evaluate_episode(env, policy, seed=1001, n_action_steps=10)
    skipped_renders, renders[:] = list(renders), []
    every = evaluate_episode(env, policy, seed=1001, n_action_steps=10, render_every_tick=True)
    env.close()
    assert skipped_renders == [0, 10, 20], "rendered at the reset and at each re-plan tick only"
    assert renders == list(range(26))
    assert skipping.policy_calls == 3
    assert skipping.to_dict() | {"mean_inference_s": 0} == every.to_dict() | {"mean_inference_s": 0}


def test_training_resumes_and_the_curve_evaluates_each_checkpoint_once(tiny_dataset, tmp_path, monkeypatch):
    from act_lab import curve as curves
    from act_node.training import last_checkpoint, train

    run = tmp_path / "run"
    train(tiny_dataset, "local/act_node_pick", run, steps=2, device="cpu", extra=TINY_ACT, save_freq=1)
    assert last_checkpoint(run).resolve().name == "000002"
    with pytest.raises(FileExistsError, match="--resume"):
        train(tiny_dataset, "local/act_node_pick", run, steps=4, device="cpu", extra=TINY_ACT)
    train(tiny_dataset, "local/act_node_pick", run, steps=4, device="cpu", extra=[], save_freq=2, resume=True)
    assert [step for step, _ in curves.checkpoints(run)] == [1, 2, 4]
    state = json.loads((run / "checkpoints" / "000004" / "training_state" / "training_step.json").read_text())
    assert state["step"] == 4  # continued from step 2, not started over

    config = GraphConfig(policy="act", checkpoint=str(curves.checkpoints(run)[0][1]), episodes=2, first_seed=1000,
                         objects=2, image_height=TINY_IMAGE[0], image_width=TINY_IMAGE[1], max_steps=10)
    points = curves.curve({"tiny": run}, config, tmp_path / "curve", every=2)["tiny"]
    assert [p["step"] for p in points] == [2, 4]  # every 2nd checkpoint, and the last
    assert all(p["episodes"] == 2 and p["success_ci95"][1] > 0 for p in points)
    assert (tmp_path / "curve" / "curve.png").stat().st_size > 5000
    trained_at = json.loads((run / "checkpoints" / "000004" / "pretrained_model" / "train_config.json").read_text())
    assert [p["batch_size"] for p in points] == [trained_at["batch_size"]] * 2
    assert curves.batch_labels({"tiny": points})[0] == f"training steps (batch {trained_at['batch_size']})"
    assert curves.batch_labels({"a": [{"batch_size": 8}], "b": [{"batch_size": 64}], "c": [{}]}) == \
        ("training steps", {"a": "a (batch 8)", "b": "b (batch 64)", "c": "c"})
    monkeypatch.setattr(curves, "evaluate", lambda *a, **k: pytest.fail("a finished point was evaluated again"))
    again = curves.curve({"tiny": run}, config, tmp_path / "curve", every=2)["tiny"]
    assert again == points
    with pytest.raises(FileNotFoundError, match=r"no checkpoint at steps \[3\]"):
        curves.curve({"tiny": run}, config, tmp_path / "curve", steps=[2, 3])


def test_two_processes_under_accelerate_train_a_checkpoint_that_evaluates(tiny_dataset, tmp_path):
    """`act-sim train --num-processes 2` on the CPU: accelerate launch starts two lerobot-train processes (gloo),
    each takes its own batch of 2 a step, and the checkpoint they write loads and evaluates."""
    import socket

    with socket.socket() as free:  # a port of its own: another run's processes may meet on the default one
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "act_node.cli", "train", f"--dataset-root={tiny_dataset}",
                             f"--output-dir={out}", "--steps=4", "--num-processes=2", f"--main-process-port={port}",
                             *TINY_ACT], capture_output=True, text=True, timeout=900)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "accelerate.commands.launch" in log and "Effective batch size: 2 x 2 = 4" in log, log[-4000:]
    model = out / "checkpoints" / "last" / "pretrained_model"
    config = GraphConfig(policy="act", checkpoint=str(model), episodes=1, first_seed=1000, objects=2,
                         image_height=TINY_IMAGE[0], image_width=TINY_IMAGE[1], max_steps=12)
    report = evaluate(config, out=tmp_path / "eval", videos=0)
    assert report["episodes"] == 1 and report["per_episode"][0]["policy_calls"] == 2  # 12 steps, 10 a chunk


def test_a_process_count_under_one_is_refused():
    from act_node.training import launcher

    with pytest.raises(ValueError, match="--num-processes must be 1 or more, got 0"):
        launcher(0, "cpu")
    assert launcher(1, "cpu")[-1] == "lerobot.scripts.lerobot_train"
