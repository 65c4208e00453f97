"""The find-the-cup networks' lab: the rates study (results/attention), the attention pictures, the training of the
shipped selector (`act-lab attention demo | results | models | picture`). The networks and the selector the graph
runs are act_node.attention's."""
