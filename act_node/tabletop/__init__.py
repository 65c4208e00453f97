"""The PyBullet table-top: an SO-101-style arm, eight kinds of object, cameras, the pick task as a
gymnasium env (`ActNode/PickObject-v0`) and a scripted expert."""

import gymnasium as gym

ENV_ID = "ActNode/PickObject-v0"

if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="act_node.tabletop.env:PickObjectEnv", disable_env_checker=True)
