"""act_lab.studies.nearest's two numbers: the nearest other object's offset from the target."""

import numpy as np

from act_lab.studies.nearest import nearest_offset


def test_the_object_at_the_target_is_dropped_and_the_nearest_of_the_rest_given_relative_to_the_target():
    target = (0.500, 0.400)
    # the requested object as read (2 mm off the Selector's point), one 10 cm away, one 25 cm away
    objects = [(0.60, 0.40), (0.502, 0.399), (0.50, 0.65)]
    np.testing.assert_allclose(nearest_offset(target, objects), [0.10, 0.0], atol=1e-6)
    assert nearest_offset(target, objects).dtype == np.float32


def test_the_order_of_the_objects_does_not_matter():
    target = (0.3, 0.3)
    objects = [(0.3, 0.3), (0.2, 0.35), (0.45, 0.3), (0.3, 0.1)]
    for shift in range(4):
        np.testing.assert_allclose(nearest_offset(target, objects[shift:] + objects[:shift]), [-0.1, 0.05], atol=1e-6)


def test_a_scene_without_another_object_gives_zeros():
    np.testing.assert_array_equal(nearest_offset((0.5, 0.5), [(0.5, 0.5)]), [0.0, 0.0])
    np.testing.assert_array_equal(nearest_offset((0.5, 0.5), []), [0.0, 0.0])
