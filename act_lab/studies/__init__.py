"""The scripts behind results/ that drive act-sim's own commands (each study's README under results/ gives the
command that made its numbers)."""
