"""Find the cup: small attention networks that answer which object on the table a request points at.

  networks.py  the reference page's networks (Lookup, Transformer, Plain) and their scenes, training, misses
  selector.py  a trained Lookup as the graph uses it: objects in, the target's place (or "absent") out

Training them, the rates study behind results/attention and the attention pictures are the lab's
(act_lab.attention, `act-lab attention`).

Importing the package loads nothing (no torch): the kinds' names live in act_node.table_frame.
"""
