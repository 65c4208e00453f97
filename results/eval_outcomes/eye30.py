"""Contact sheets of every filmed episode of an act-sim eval, for checking the outcome modes by eye: one row an
episode (seed, task, the mode the report gives, the facts it was judged from), three frames of its video: a
third of the way, two thirds, and the last (the end is where most modes show: held or not, lifted or on the table).

    act-sim eval --policy.path models/act_pick --episodes 30 --first-seed 2100 --videos 30 --workers 1 --out /tmp/eye30
    .venv/bin/python results/eval_outcomes/eye30.py /tmp/eye30 results/eval_outcomes/eye30
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import av
import numpy as np
from PIL import Image, ImageDraw

ROWS = 5
SCALE = 3
AT = (1 / 3, 2 / 3, 1.0)  # of the video's frames


def frames_of(video: Path) -> list[np.ndarray]:
    with av.open(str(video)) as container:
        every = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    return [every[round(at * (len(every) - 1))] for at in AT]


def caption(episode: dict) -> str:
    facts = episode["outcome_facts"]
    return (f"seed {episode['seed']}  {episode['task']}  ->  {episode['outcome']}   (held {facts['held_ticks']} ticks, "
            f"lift {facts['max_held_lift_m'] * 100:.1f} cm, closest {facts['closest_reach_m'] * 100:.1f} cm, "
            f"held at end {facts['held_at_end']})")


def main(folder: str, out: str) -> None:
    report = json.loads((Path(folder) / "report.json").read_text())
    episodes = [e for e in report["per_episode"] if (Path(folder) / f"episode_seed{e['seed']}.mp4").exists()]
    Path(out).mkdir(parents=True, exist_ok=True)
    for sheet in range(0, len(episodes), ROWS):
        rows = []
        for episode in episodes[sheet:sheet + ROWS]:
            frames = frames_of(Path(folder) / f"episode_seed{episode['seed']}.mp4")
            strip = Image.fromarray(np.concatenate(frames, axis=1))
            strip = strip.resize((strip.width * SCALE, strip.height * SCALE), Image.NEAREST)
            row = Image.new("RGB", (strip.width, strip.height + 22), "white")
            row.paste(strip, (0, 22))
            ImageDraw.Draw(row).text((4, 4), caption(episode), fill="black")
            rows.append(row)
        page = Image.new("RGB", (rows[0].width, sum(r.height for r in rows)), "white")
        y = 0
        for row in rows:
            page.paste(row, (0, y))
            y += row.height
        path = Path(out) / f"sheet{sheet // ROWS + 1}.png"
        page.save(path)
        print(path)


if __name__ == "__main__":
    main(*sys.argv[1:3])
