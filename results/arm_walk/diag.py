"""Print the arm node's /diagnostics key values once (a stand-in for `ros2 topic echo --once /diagnostics`).

    python results/arm_walk/diag.py [KEY ...]     # exits 1 when no arm status arrives within 15 s
"""

import sys
import time

import rclpy
from diagnostic_msgs.msg import DiagnosticArray

DEFAULT_KEYS = ["state", "chunks_received", "chunks_applied", "chunks_rejected", "faults", "hold_reason"]


def level_of(status) -> int:
    level = status.level
    return int.from_bytes(level, "little") if isinstance(level, bytes) else int(level)


def main() -> int:
    keys = sys.argv[1:] or DEFAULT_KEYS
    rclpy.init()
    node = rclpy.create_node("walk_diag")
    got = []
    node.create_subscription(DiagnosticArray, "/diagnostics", got.append, 10)
    end = time.monotonic() + 15
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.2)
        for message in got:
            for status in message.status:
                if "so101" not in status.name and "arm" not in status.name:
                    continue
                values = {kv.key: kv.value for kv in status.values}
                print(status.name, "level", level_of(status), status.message)
                for key in keys:
                    for name, value in values.items():
                        if name == key or name.startswith(key + "."):
                            print(f"  {name} = {value}")
                return 0
        got.clear()
    print("no arm diagnostics within 15 s")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
