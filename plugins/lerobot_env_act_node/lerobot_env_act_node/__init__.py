"""LeRobot EnvConfig for act_node's table-top: `lerobot-eval --env.type=act_node_pick --policy.path=DIR`.

LeRobot discovers this module by its distribution name (lerobot_env_*) and imports it; registering the
config subclass is all it takes. The env itself lives in act_node.tabletop.

`--eval.batch_size N` runs N envs in a gymnasium vector env (sync, or async in forkserver processes with
`--eval.use_async_envs`, lerobot-eval's default above one env), seeds `--seed`, +1, ... across the batch, as
act-sim eval numbers its episodes: the same seed is the same scene either way.
"""

from dataclasses import dataclass, field

from lerobot.configs import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig
from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_IMAGES, OBS_STATE

from act_node import so101
from act_node.config import DEFAULT_CAMERAS, EPISODE_STEPS, FPS, SETTINGS, SIM_IMAGE_SIZE, GraphConfig
from act_node.observation import environment_state_names
from act_node.tabletop import ENV_ID


@EnvConfig.register_subclass("act_node_pick")
@dataclass
class ActNodePickEnv(EnvConfig):
    task: str | None = "PickObject-v0"
    fps: int = FPS
    episode_length: int = EPISODE_STEPS
    objects: int = 4
    cameras: str = ",".join(DEFAULT_CAMERAS)  # comma-separated: front, top, wrist
    observation_height: int = SIM_IMAGE_SIZE[0]
    observation_width: int = SIM_IMAGE_SIZE[1]
    target_source: str = "selector"  # or "truth"
    # auto: the faster for the image size (TinyRenderer below 32,000 pixels a frame, EGL from there where it
    # loads). LeRobot makes the env without the policy, so auto cannot follow a camera checkpoint's dataset here
    # as act-sim eval does: give --env.renderer with what its meta/act_node_renderer.json says (missing: tiny)
    renderer: str = "auto"
    # observation.environment_state's layout (act_node.observation): target (10), target_tool (13, the tool
    # relative to the target as well), target_tool_yaw (15, and the requested object's yaw, which the env reads
    # from its cameras with models/yaw_reader) or target_tool_yaw_grasp (19, and the grasp the expert's planner
    # chooses at reset: act_node.grasp); like the renderer, give the one the checkpoint was trained on
    environment_layout: str = "target"
    # where the selector's objects come from, as act-sim eval's --scene: cameras (the scene reader on the front
    # camera, scene_reader: its folder, '': models/scene_reader) or sim (the simulator's truth)
    scene: str = SETTINGS["scene"].default
    scene_reader: str = ""
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self.graph = GraphConfig(objects=self.objects, cameras=self.cameras, image_height=self.observation_height,
                                 image_width=self.observation_width, max_steps=self.episode_length,
                                 target_source=self.target_source, fps=self.fps,
                                 renderer=self.renderer, scene=self.scene,
                                 scene_reader=self.scene_reader)  # checks every field
        names = environment_state_names(self.environment_layout)  # ValueError naming the layouts
        self.features = {
            ACTION: PolicyFeature(type=FeatureType.ACTION, shape=(len(so101.JOINT_NAMES),)),
            "agent_pos": PolicyFeature(type=FeatureType.STATE, shape=(len(so101.JOINT_NAMES),)),
            "environment_state": PolicyFeature(type=FeatureType.ENV, shape=(len(names),)),
        }
        self.features_map = {ACTION: ACTION, "agent_pos": OBS_STATE, "environment_state": OBS_ENV_STATE}
        for camera in self.camera_names:
            key = f"pixels/{camera}"
            self.features[key] = PolicyFeature(type=FeatureType.VISUAL,
                                               shape=(self.observation_height, self.observation_width, 3))
            self.features_map[key] = f"{OBS_IMAGES}.{camera}"

    def create_envs(self, n_envs: int, use_async_envs: bool = False):
        """EnvConfig.create_envs's vector env (gym.make of act_node.tabletop's id, SAME_STEP autoreset, async in
        forkserver processes), each env wrapped in LeRobot's FreezeAfterEpisodeEnd: an env whose episode ended waits
        for the batch's slowest without stepping a fresh episode that autoreset started. lerobot-eval sums each
        episode's rewards up to one step past its end; frozen, that step adds 0, so its sums are the episode's own
        (act-sim eval's sum_reward), and the finished envs cost nothing."""
        import gymnasium as gym
        from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
        from lerobot.envs.utils import freeze_after_episode_end

        import act_node.tabletop  # noqa: F401 (registers the gymnasium id)

        def make_one():
            return gym.make(self.gym_id, disable_env_checker=self.disable_env_checker, **self.gym_kwargs)

        if use_async_envs and n_envs > 1:
            vector = AsyncVectorEnv([freeze_after_episode_end(make_one) for _ in range(n_envs)],
                                    autoreset_mode=AutoresetMode.SAME_STEP, context="forkserver")
        else:
            vector = SyncVectorEnv([freeze_after_episode_end(make_one) for _ in range(n_envs)],
                                   autoreset_mode=AutoresetMode.SAME_STEP)
        return {self.type: {0: vector}}

    @property
    def camera_names(self) -> tuple[str, ...]:
        return self.graph.cameras

    @property
    def package_name(self) -> str:
        return "act_node.tabletop"  # importing it registers the gymnasium id

    @property
    def gym_id(self) -> str:
        return ENV_ID

    @property
    def gym_kwargs(self) -> dict:
        kwargs = {**self.graph.env_kwargs(), "environment_layout": self.environment_layout}
        from act_node.table_frame import GRASP_LAYOUTS, YAW_LAYOUTS

        if self.environment_layout in YAW_LAYOUTS:  # the env reads the yaw with it (act_node.envs)
            from act_node.envs import yaw_reader

            kwargs["yaw_reader"] = yaw_reader()
        if self.environment_layout in GRASP_LAYOUTS:  # and plans the grasp with it (act_node.grasp)
            from act_node.grasp import planned_grasp

            kwargs["grasp_planner"] = planned_grasp
        folder = kwargs.pop("scene_reader_model", "")
        if kwargs.get("scene") == "cameras":  # the selector reads the scene reader's reading (act_node.envs)
            from act_node.envs import scene_reader

            kwargs["scene_reader"] = scene_reader(folder)
        return kwargs
