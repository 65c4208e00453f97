"""Print the arm node's /diagnostics key values once (a stand-in for `ros2 topic echo --once /diagnostics`)."""
import sys, time, rclpy
from diagnostic_msgs.msg import DiagnosticArray
keys = sys.argv[1:] or ["state", "chunks_received", "chunks_applied", "chunks_rejected", "faults", "hold_reason"]
rclpy.init(); node = rclpy.create_node("walk_diag"); got = []
node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: got.append(m), 10)
end = time.monotonic() + 15
while time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.2)
    for m in got:
        for s in m.status:
            if "so101" in s.name or "arm" in s.name:
                values = {kv.key: kv.value for kv in s.values}
                print(s.name, "level", int.from_bytes(s.level, "little") if isinstance(s.level, bytes) else s.level, s.message)
                for k in keys:
                    for kk, v in values.items():
                        if kk == k or kk.startswith(k + "."):
                            print(f"  {kk} = {v}")
                raise SystemExit(0)
    got.clear()
print("no arm diagnostics within 15 s"); raise SystemExit(1)
