"""Find the cup: small attention networks that answer which object on the table a request points at.

  networks.py  the reference page's networks (Lookup, Transformer, Plain) and their scenes, training, misses
  selector.py  a trained Lookup as the graph uses it: objects in, the target's place (or "absent") out
  cli.py       `act-attention`: train, score and draw them (demo, results, models)
  figure.py    the attention weights drawn over a scene
  study.py     the rates study behind results/attention

Importing the package loads nothing (no torch): the kinds' names live in act_node.table_frame.
"""
