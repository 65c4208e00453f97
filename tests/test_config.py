"""GraphConfig: checked when made, and its launch arguments make the same config again."""

import pytest

from act_node.config import GraphConfig


def test_launch_arguments_round_trip_to_the_same_config():
    config = GraphConfig(cameras="front", max_velocity=1e9, lockstep_timeout_s=3600.0, record_video=False,
                         video_dir="/tmp/results", objects=6, clock="realtime")
    arguments = config.to_arguments()
    assert arguments["cameras"] == "front" and arguments["record_video"] == "false"
    assert GraphConfig.from_arguments(arguments) == config


def test_bad_values_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="objects must be at most 8, got 9"):
        GraphConfig(objects=9)
    with pytest.raises(ValueError, match="launch argument objects:='four' is not a int"):
        GraphConfig.from_arguments({"objects": "four"})
    with pytest.raises(ValueError, match="unknown launch arguments"):
        GraphConfig.from_arguments({"polcy": "act"})


def fake_checkpoint(folder, cameras=("front",), dataset_root=None):
    """A pretrained_model folder as far as the renderer's choice reads it: config.json's input features and,
    with `dataset_root`, the train_config.json that names its dataset."""
    import json

    folder.mkdir(parents=True)
    features = {f"observation.images.{c}": {"type": "VISUAL", "shape": [3, 48, 64]} for c in cameras}
    features["observation.state"] = {"type": "STATE", "shape": [6]}
    (folder / "config.json").write_text(json.dumps({"input_features": features, "n_action_steps": 30}))
    if dataset_root is not None:
        (folder / "train_config.json").write_text(json.dumps({"dataset": {"root": str(dataset_root)}}))
    return folder


def test_auto_draws_a_camera_checkpoint_with_its_datasets_renderer(tmp_path):
    from act_node.checkpoints import RENDERER_FILE, checkpoint_renderer, write_renderer

    dataset = tmp_path / "data"
    (dataset / "meta").mkdir(parents=True)
    (dataset / "meta" / "info.json").write_text("{}")
    model = fake_checkpoint(tmp_path / "model", dataset_root=dataset)

    def chosen(renderer="auto") -> str:
        return GraphConfig(policy="act", checkpoint=str(model), renderer=renderer).sim_renderer()

    # a dataset recorded before datasets said what drew them: every one was drawn with TinyRenderer
    assert checkpoint_renderer(model) == "tiny" and chosen() == "tiny"
    write_renderer(dataset / "meta", "egl")
    assert chosen() == "egl" and chosen("tiny") == "tiny"  # what the user names stands
    write_renderer(model, "tiny")  # the checkpoint's own record (act-sim train's copy) wins over the dataset's
    assert chosen() == "tiny"
    (model / RENDERER_FILE).unlink()
    dataset.joinpath("meta", "info.json").unlink()
    (dataset / "meta" / RENDERER_FILE).unlink()
    assert checkpoint_renderer(model) is None and chosen() == "tiny"  # its dataset is not here: TinyRenderer
    # no images to match: auto stays auto, and the world draws with EGL where it loads
    assert GraphConfig(policy="act", checkpoint=str(fake_checkpoint(tmp_path / "state", cameras=()))).sim_renderer() \
        == "auto"
    assert GraphConfig(policy="expert").sim_renderer() == "auto"
    assert GraphConfig(policy="act", checkpoint=str(model)).env_kwargs()["renderer"] == "tiny"


def test_a_renderer_chosen_against_the_checkpoint_is_named_and_a_broken_record_refused(tmp_path):
    from act_node.checkpoints import RENDERER_FILE, write_renderer

    model = fake_checkpoint(tmp_path / "model")
    write_renderer(model, "egl")
    warning = GraphConfig(policy="act", checkpoint=str(model), renderer="tiny").renderer_mismatch()
    assert "renderer 'tiny'" in warning and "drawn with 'egl'" in warning and "renderer at auto" in warning
    assert GraphConfig(policy="act", checkpoint=str(model), renderer="egl").renderer_mismatch() is None
    assert GraphConfig(policy="act", checkpoint=str(model)).renderer_mismatch() is None
    (model / RENDERER_FILE).write_text('{"renderer": "opengl"}')
    with pytest.raises(ValueError, match="names renderer 'opengl'"):
        GraphConfig(policy="act", checkpoint=str(model)).sim_renderer()
    with pytest.raises(ValueError, match="renderer must be one of auto, tiny, egl, got 'opengl'"):
        GraphConfig(renderer="opengl")


def test_merge_auto_runs_a_checkpoint_as_its_config_says(tmp_path):
    """merge:=auto is the checkpoint's own execution: ACT's temporal ensembling, a chunk every tick, with its
    coefficient when config.json sets temporal_ensemble_coeff (as LeRobot's ACTPolicy runs it), else replace at its
    n_action_steps; a rule the user names stands, and a broken coefficient is refused naming the file."""
    import json

    model = fake_checkpoint(tmp_path / "model", cameras=())
    chunks = GraphConfig(policy="act", checkpoint=str(model))
    assert chunks.chunk_merge() == ("replace", 0.01) and chunks.replan_ticks() == 30
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "n_action_steps": 1, "temporal_ensemble_coeff": 0.05}))
    ensembled = GraphConfig(policy="act", checkpoint=str(model))
    assert ensembled.chunk_merge() == ("ensemble", 0.05) and ensembled.replan_ticks() == 1
    assert ensembled.replace(merge="replace").chunk_merge() == ("replace", 0.05)
    assert ensembled.replace(merge="replace", replan_every=30).replan_ticks() == 30
    assert GraphConfig(policy="expert").chunk_merge() == ("replace", 0.01)
    # no config.json: no coefficient to read (the policy node refuses the folder, naming what is missing)
    missing = GraphConfig(policy="act", checkpoint=str(tmp_path / "absent"), replan_every=10)
    assert missing.chunk_merge() == ("replace", 0.01) and missing.replan_ticks() == 10
    assert GraphConfig(policy="expert", merge="ensemble").replan_ticks() == 30  # the expert keeps its cadence
    (model / "config.json").write_text(json.dumps({**config, "temporal_ensemble_coeff": "fast"}))
    with pytest.raises(ValueError, match="cannot read temporal_ensemble_coeff from .*config.json"):
        GraphConfig(policy="act", checkpoint=str(model)).chunk_merge()
    with pytest.raises(ValueError, match="merge must be one of auto, replace, average, ensemble, got 'blend'"):
        GraphConfig(merge="blend")


def test_the_shipped_checkpoint_runs_temporally_ensembled_in_every_runner():
    """The shipped checkpoint's config.json says how it runs (n_action_steps 1, temporal_ensemble_coeff 0.01:
    results/act_grasp measured it best), so lerobot-eval, act-sim eval, the sim graph and the arm graph agree."""
    from act_node.checkpoints import checkpoint_ensemble_coeff, checkpoint_n_action_steps
    from act_node.config import shipped_checkpoint
    from act_node.nodes.graph import describe

    assert checkpoint_n_action_steps(shipped_checkpoint()) == 1
    assert checkpoint_ensemble_coeff(shipped_checkpoint()) == 0.01
    sim, _reader, _selector, policy = describe()
    assert (sim.parameters["merge"], sim.parameters["ensemble_coeff"], sim.parameters["replan_every"]) == \
        ("ensemble", 0.01, 1)
    assert policy.parameters["replan_every"] == 1 and policy.parameters["infer"] == "every_n"
    assert describe(merge="replace", replan_every="30")[0].parameters["merge"] == "replace"
    arm = describe(robot="so101", port="/dev/x", checkpoint=shipped_checkpoint())[0]
    assert (arm.parameters["merge"], arm.parameters["ensemble_coeff"]) == ("ensemble", 0.01)
    assert describe(policy="expert")[0].parameters["merge"] == "replace"


def test_on_the_wall_clock_the_policy_leaves_the_sim_or_the_arm_a_core(monkeypatch, tiny_checkpoint):
    """threads:=0 under clock:=realtime: the policy node gets one core fewer than there are (the sim renders and
    steps on the wall clock beside it); lockstep keeps torch's default, and threads:= given is kept under both."""
    import os

    from act_node.nodes.graph import describe

    def policy(**arguments):
        return next(node for node in describe(**arguments) if node.name == "act_policy").parameters["threads"]

    for cores, expected in ((2, 1), (8, 7), (1, 1)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, cores=cores: set(range(cores)))
        assert policy(clock="realtime") == expected, cores
    assert policy() == 0  # lockstep: the sim waits while the policy thinks
    assert policy(clock="realtime", threads="2") == 2
    assert policy(threads="1") == 1
    arm = dict(robot="so101", port="/dev/ttyACM0", id="arm1", checkpoint=str(tiny_checkpoint), task="pick up the cup")
    for cores, expected in ((2, 1), (8, 7)):  # an arm runs on the wall clock: its bus loop and cameras keep a core
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, cores=cores: set(range(cores)))
        assert policy(**arm) == expected, cores
    assert policy(**arm, threads="4") == 4


def test_a_chunk_stays_fresh_until_the_next_is_due_and_answered(tiny_checkpoint):
    """stale_after_s: the next chunk is asked for replan_every ticks on and lands an inference later. The arm walk
    (results/arm_walk) held about once a second with a chunk checkpoint re-planning every 30 ticks, when the bound
    was one tick past the due one (1.033 s) and inference took longer than a tick."""
    from act_node.config import GraphConfig

    def stale(**fields):
        return GraphConfig(checkpoint=str(tiny_checkpoint), **fields).stale_after_s()

    assert stale(replan_every=30) == pytest.approx(30 / 30 + 0.5)  # 1.5 s: half a second for the answer
    assert stale(replan_every=60) == pytest.approx(2.5)
    assert stale(replan_every=1) == 1.0 and stale(replan_every=10) == 1.0  # at least a second
    assert stale() == 1.0  # the tiny ACT's n_action_steps, 10


def test_the_checkpoints_facts_are_read_once_when_the_config_is_made(tmp_path):
    """GraphConfig reads its checkpoint's files when it is made (config.facts): asked again after the folder is
    gone, every fact is the same answer, so a launch argument's way to a node parameter reads no file."""
    import json
    import shutil

    from act_node.checkpoints import write_renderer

    model = fake_checkpoint(tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "n_action_steps": 20}))
    write_renderer(model, "egl")
    made = GraphConfig(policy="act", checkpoint=str(model), renderer="tiny")
    before = (made.chunk_merge(), made.replan_ticks(), made.environment_layout(), made.sim_renderer(),
              made.renderer_mismatch(), made.stale_after_s())
    assert before[:2] == (("replace", 0.01), 20) and "drawn with 'egl'" in before[4]
    shutil.rmtree(model)
    assert (made.chunk_merge(), made.replan_ticks(), made.environment_layout(), made.sim_renderer(),
            made.renderer_mismatch(), made.stale_after_s()) == before
    assert made.facts.has_config and made.facts.n_action_steps == 20 and made.facts.renderer == "egl"
    # a config made again reads again: the folder is gone, so the facts say so
    again = made.replace(renderer="auto")
    assert not again.facts.has_config and again.chunk_merge() == ("replace", 0.01)
    with pytest.raises(ValueError, match="cannot read n_action_steps from .*config.json"):
        again.replan_ticks()


def test_the_scene_is_read_from_the_cameras_by_default_and_truths_target_reads_none():
    """scene:=cameras is the default (the selector's objects from the scene reader); target_source:=truth takes
    the sim's target without a selector, so nothing is read and the scene is the sim's; scene:=sim stays for
    comparisons; act-sim record keeps the truth's target in its datasets unless asked (the recipes' data)."""
    from act_node.cli import make_parser

    assert GraphConfig().scene == "cameras" and GraphConfig(scene="sim").scene == "sim"
    assert GraphConfig(target_source="truth").scene == "sim"
    assert "scene_reader_model" in GraphConfig().env_kwargs()
    assert GraphConfig(target_source="truth").env_kwargs()["scene"] == "sim"
    parser = make_parser()
    assert parser.parse_args(["eval", "--policy.path", "x"]).scene == "cameras"
    assert parser.parse_args(["record"]).scene == "sim"
    assert parser.parse_args(["record", "--scene", "cameras"]).scene == "cameras"


def test_a_resumed_evaluation_knows_the_scene_readers_weights_and_reports_only_chosen_settings(tmp_path):
    """An in-process episode with scene:=cameras depends on the scene reader's weights: the journal's header holds
    their digest (another reader's journal is evaluated anew), none with scene:=sim; the report's settings are the
    ones chosen, not the facts read from the checkpoint's files."""
    from act_node.evaluate import folder_digest, journal_header
    from act_node.perception.scene import default_model_dir

    cameras = GraphConfig(policy="expert")
    assert journal_header(cameras, 30, None)["scene_reader"] == folder_digest(default_model_dir())
    assert journal_header(cameras.replace(scene="sim"), 30, None)["scene_reader"] is None
    chosen = GraphConfig(policy="act").chosen()
    assert "facts" not in chosen and chosen["scene"] == "cameras" and chosen["checkpoint"]
