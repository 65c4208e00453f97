"""Drive lerobot-calibrate as a person would: ENTER at the first prompt, then ENTER once the bus's stderr log
says the simulated hand is done.

    python results/arm_walk/calibrate.py BUS_STDERR_LOG -- lerobot-calibrate ARGS...
"""

import os
import subprocess
import sys
import threading
import time


def main() -> None:
    log = sys.argv[1]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    start_size = os.path.getsize(log)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)
    out: list[str] = []

    def stamp() -> str:
        return f"[{time.monotonic() - t0:6.1f}s]"

    def reader() -> None:
        fd = proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            text = chunk.decode(errors="replace")
            out.append(text)
            print(f"{stamp()} {text}", end="" if text.endswith("\n") else "\n", flush=True)

    def wait_for(pred, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return True
            if proc.poll() is not None:
                return False
            time.sleep(0.2)
        return False

    def press_enter() -> None:
        time.sleep(1)
        if proc.poll() is None:
            proc.stdin.write(b"\n")
            proc.stdin.flush()

    def hand_done() -> bool:
        with open(log) as f:
            f.seek(start_size)
            return "press ENTER in lerobot-calibrate" in f.read()

    threading.Thread(target=reader, daemon=True).start()
    ok = wait_for(lambda: "press enter" in "".join(out).lower(), 120)
    print(f"{stamp()} >>> first prompt seen: {ok}; pressing ENTER", flush=True)
    press_enter()
    ok = wait_for(hand_done, 300)
    print(f"{stamp()} >>> bus says hand done: {ok}; pressing ENTER", flush=True)
    press_enter()
    try:
        rc = proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "timeout"
    time.sleep(0.3)
    print(f"{stamp()} >>> lerobot-calibrate exit {rc}", flush=True)


if __name__ == "__main__":
    main()
