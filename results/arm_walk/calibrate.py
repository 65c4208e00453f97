"""Drive lerobot-calibrate as a person would: ENTER at the first prompt, then ENTER once the bus's stderr log
says the simulated hand is done. usage: calibrate.py BUS_STDERR_LOG -- lerobot-calibrate args..."""
import subprocess, sys, time, threading, os
log = sys.argv[1]; cmd = sys.argv[sys.argv.index("--") + 1:]
start_size = os.path.getsize(log)
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)
out = []
def reader():
    fd = p.stdout.fileno()
    while True:
        chunk = os.read(fd, 4096)
        if not chunk: break
        text = chunk.decode(errors="replace")
        out.append(text); print(f"[{time.monotonic()-t0:6.1f}s] {text}", end="" if text.endswith("\n") else "\n", flush=True)
threading.Thread(target=reader, daemon=True).start()
def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred(): return True
        if p.poll() is not None: return False
        time.sleep(0.2)
    return False
ok = wait_for(lambda: "press enter" in "".join(out).lower(), 120)
print(f"[{time.monotonic()-t0:6.1f}s] >>> first prompt seen: {ok}; pressing ENTER", flush=True)
time.sleep(1)
if p.poll() is None: p.stdin.write(b"\n"); p.stdin.flush()
def hand_done():
    with open(log) as f:
        f.seek(start_size); return "press ENTER in lerobot-calibrate" in f.read()
ok = wait_for(hand_done, 300)
print(f"[{time.monotonic()-t0:6.1f}s] >>> bus says hand done: {ok}; pressing ENTER", flush=True)
time.sleep(1)
if p.poll() is None: p.stdin.write(b"\n"); p.stdin.flush()
try:
    rc = p.wait(120)
except subprocess.TimeoutExpired:
    p.kill(); rc = "timeout"
time.sleep(0.3)
print(f"[{time.monotonic()-t0:6.1f}s] >>> lerobot-calibrate exit {rc}", flush=True)
