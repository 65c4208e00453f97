"""The real arm: one interface for a simulated and a real SO-101 (interface.py), LeRobot's SO follower behind
it (follower.py), its calibration (calibration.py), the safety chain (safety.py), the control loop without ROS
(control.py), and a simulated STS3215 servo bus for tests without hardware (servo_sim.py)."""
