"""A vision encoder made for this table-top: LeRobot ACT's own ResNet-18 trunk, pretrained on what the simulator
knows for free about each camera image, exported so that it loads into a plain ACT checkpoint's backbone.

    labels.py    what each camera image shows: per kind, present or not, its centre in the image, its yaw by its
                 symmetry; for the wrist camera the object's offset from the tcp and whether it is between the jaws
    frames.py    images in the states the policy meets (scenes as PickObjectEnv.reset samples them, the arm along
                 perturbed scripted-expert episodes), written as resumable uint8 shards
    networks.py  the trunk (ACT's backbone with trainable BatchNorm2d), the detection-grid and wrist heads, the
                 losses and the metrics
    export.py    BatchNorm2d -> FrozenBatchNorm2d, ACT's `model.backbone.*` keys in a safetensors file, and the
                 loader that puts it into an ACTPolicy
    train.py     the training loop: AdamW, cosine schedule, validation each epoch, checkpoints, resume; the
                 frozen-random-trunk baseline
    encoder.py   the stage as one command: python -m act_lab.vision.encoder --out outputs/recipe/encoder
    yaw.py       the yaw reader: the frozen encoder's maps of the front and wrist images -> the requested object's
                 (cos k*yaw, sin k*yaw), environment_state's target_tool_yaw (models/yaw_reader)
"""
