"""act_lab: the experiments beside act_node, a second import root (`act-lab`).

  recipe.py    an ACT from an empty folder, every stage resumable (the shipped checkpoints' recipes)
  takeover.py  second attempts: a policy acts, the expert takes over where it misses (act-lab record --takeover-from)
  curve.py     learning curves: every checkpoint of a run on the same unseen seeds
  vision/      the encoder pretrained on the table-top, its frames, the cached maps, ACT on them, the yaw reader's
               training (the reader itself is act_node.perception.yaw)
  attention/   the find-the-cup study, its pictures and the selector's training (`act-lab attention`)
  studies/     the scripts behind results/ that drive act-sim's commands
  cli.py       `act-lab`

It imports act_node; act_node never imports it (tests/test_layout.py).
"""
