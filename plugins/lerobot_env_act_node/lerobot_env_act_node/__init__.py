"""LeRobot EnvConfig for act_node's table-top: `lerobot-eval --env.type=act_node_pick --policy.path=DIR`.

LeRobot discovers this module by its distribution name (lerobot_env_*) and imports it; registering the
config subclass is all it takes. The env itself lives in act_node.tabletop.
"""

from dataclasses import dataclass, field

from lerobot.configs import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig
from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_IMAGES, OBS_STATE

from act_node import so101
from act_node.tabletop import ENV_ID
from act_node.tabletop.env import FPS, MAX_STEPS


@EnvConfig.register_subclass("act_node_pick")
@dataclass
class ActNodePickEnv(EnvConfig):
    task: str | None = "PickObject-v0"
    fps: int = FPS
    episode_length: int = MAX_STEPS
    objects: int = 4
    cameras: str = "front,wrist"  # comma-separated: front, top, wrist
    observation_height: int = 240
    observation_width: int = 320
    target_source: str = "selector"  # or "truth"
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self.features = {
            ACTION: PolicyFeature(type=FeatureType.ACTION, shape=(len(so101.JOINT_NAMES),)),
            "agent_pos": PolicyFeature(type=FeatureType.STATE, shape=(len(so101.JOINT_NAMES),)),
            "environment_state": PolicyFeature(type=FeatureType.ENV, shape=(2,)),
        }
        self.features_map = {ACTION: ACTION, "agent_pos": OBS_STATE, "environment_state": OBS_ENV_STATE}
        for camera in self.camera_names:
            key = f"pixels/{camera}"
            self.features[key] = PolicyFeature(type=FeatureType.VISUAL,
                                               shape=(self.observation_height, self.observation_width, 3))
            self.features_map[key] = f"{OBS_IMAGES}.{camera}"

    @property
    def camera_names(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.cameras.split(",") if name.strip())

    @property
    def package_name(self) -> str:
        return "act_node.tabletop"  # importing it registers the gymnasium id

    @property
    def gym_id(self) -> str:
        return ENV_ID

    @property
    def gym_kwargs(self) -> dict:
        return {"objects": self.objects, "cameras": self.camera_names,
                "image_size": (self.observation_height, self.observation_width), "fps": self.fps,
                "max_steps": self.episode_length, "target_source": self.target_source}
