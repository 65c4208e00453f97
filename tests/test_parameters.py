"""Node parameters over the real parameter services, as `ros2 param set` and `ros2 param describe` use
them: the merge rule, its ensembling coefficient, the velocity bound and the stale timeout change a running
sim; every other parameter is read-only and a set is refused with the reason; each has a description."""

import pytest
from conftest import THREADED_RENDERER, retire, wait_for
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient


@pytest.fixture(scope="module")
def sim_and_client(ros, tmp_path_factory):
    from act_node.nodes.sim_node import SimNode

    sim = SimNode(parameter_overrides=[Parameter("renderer", value=THREADED_RENDERER),
        Parameter("image_height", value=48), Parameter("image_width", value=64), Parameter("objects", value=2),
        Parameter("autostart", value=False), Parameter("record_video", value=False)])
    user = Node("param_user")  # the `ros2 param` side
    ros.add_node(sim)
    ros.add_node(user)
    client = AsyncParameterClient(user, "act_sim")
    assert client.wait_for_services(timeout_sec=10.0)
    yield sim, client
    retire(ros, sim, user)


def ros2_param_set(client, name: str, value):
    """(successful, reason) of one set over the service."""
    future = client.set_parameters([Parameter(name, value=value)])
    assert wait_for(future.done), f"no answer to setting {name}"
    answer = future.result().results[0]
    return answer.successful, answer.reason


def test_the_merge_rule_velocity_bound_and_stale_timeout_change_a_running_sim(sim_and_client):
    sim, client = sim_and_client
    executor = sim.sim.executor
    assert ros2_param_set(client, "merge", "ensemble") == (True, "")
    assert ros2_param_set(client, "max_velocity", 2.0) == (True, "")
    assert ros2_param_set(client, "stale_after_s", 0.25) == (True, "")
    assert ros2_param_set(client, "ensemble_coeff", 0.05) == (True, "")
    assert executor.merge == "ensemble" and executor.ensemble_coeff == 0.05
    assert executor.max_velocity.tolist() == [2.0] * 6
    assert executor.stale_after_s == 0.25


def test_bad_values_and_read_only_parameters_are_refused_with_the_reason(sim_and_client):
    sim, client = sim_and_client
    before = (sim.sim.executor.merge, sim.sim.executor.max_velocity.tolist())
    ok, reason = ros2_param_set(client, "merge", "blend")
    assert not ok and reason == "parameter merge must be one of replace, average, ensemble, got 'blend'"
    ok, reason = ros2_param_set(client, "merge", "auto")  # resolved from the checkpoint at start, not later
    assert not ok and reason == "parameter merge must be one of replace, average, ensemble, got 'auto'"
    coeff = sim.sim.executor.ensemble_coeff
    ok, reason = ros2_param_set(client, "ensemble_coeff", float("nan"))
    assert not ok and reason == "parameter ensemble_coeff must be finite, got nan"
    assert sim.sim.executor.ensemble_coeff == coeff
    ok, reason = ros2_param_set(client, "max_velocity", -1.0)
    assert not ok and "max_velocity" in reason  # rclpy: out of the descriptor's range
    ok, reason = ros2_param_set(client, "objects", 3)
    assert not ok and reason == "Trying to set a read-only parameter: objects."
    assert (sim.sim.executor.merge, sim.sim.executor.max_velocity.tolist()) == before
    assert sim.get_parameter("objects").value == 2


def test_every_parameter_says_what_it_is_and_whether_it_changes(sim_and_client):
    sim, client = sim_and_client
    names = [n for n in sim._parameters if n != "use_sim_time"]
    future = client.describe_parameters(names)
    assert wait_for(future.done)
    descriptors = {d.name: d for d in future.result().descriptors}
    assert set(descriptors) == set(names)
    for name, descriptor in descriptors.items():
        assert descriptor.description, f"{name} has no description"
        assert descriptor.read_only == (name not in ("merge", "ensemble_coeff", "max_velocity", "stale_after_s")), name
    assert descriptors["objects"].integer_range[0].from_value == 1
    assert descriptors["merge"].additional_constraints == "one of auto, replace, average, ensemble"


@pytest.mark.parametrize("make, parameter, value", [
    ("act_node.nodes.expert_node:ExpertNode", "replan_every", 10),
    ("act_node.nodes.selector_node:SelectorNode", "model", "elsewhere"),
])
def test_the_other_nodes_parameters_are_read_only(ros, make, parameter, value):
    import importlib

    module, name = make.split(":")
    node = getattr(importlib.import_module(module), name)()
    result = node.set_parameters([Parameter(parameter, value=value)])[0]
    assert not result.successful and "read-only" in result.reason
    node.destroy_node()
