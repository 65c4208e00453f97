"""What the cameras are read into at run time.

  backbone.py  ACT's backbone from a file (the table-top encoder, models/tabletop_encoder), loaded and run
  yaw.py       the yaw reader: the requested object's yaw at reset from the front and wrist cameras (models/yaw_reader)

Training them is the lab's (act_lab.vision).
"""
