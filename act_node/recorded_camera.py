"""A recorded video standing in for a camera, so the arm's path can be tried without one: the camera node plays it
(`camera_devices:=front.mp4,wrist.mp4`) at its own fps, from the start again at the end.

Decoded with PyAV (LeRobot's own decoder), so a LeRobotDataset's camera videos play too, AV1 included, which
OpenCV's wheels cannot decode: e.g. a camera of an `act-sim record` dataset at the size a checkpoint trained on
it takes, `<dataset>/videos/observation.images.front/chunk-000/file-000.mp4`. It offers what the camera node asks
of LeRobot's OpenCVCamera: `async_read`, `is_connected`, `disconnect`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


class RecordedCamera:
    """Frames of a video file in order, one a read, looped; ValueError naming the file when it holds no video."""

    def __init__(self, path: str | Path):
        import av

        self.path = Path(path)
        try:
            self._container = av.open(str(self.path))
            if not self._container.streams.video:
                raise ValueError("no video stream")
        except (av.error.FFmpegError, ValueError) as error:
            raise ValueError(f"camera device {self.path} is a file but no video PyAV can read ({error}): give a "
                             "camera index, a /dev/video path or a video file") from None
        self._frames = self._container.decode(video=0)
        self.is_connected = True
        self.loops = 0  # times the video started again from its first frame

    def async_read(self, timeout_ms: float = 0.0) -> np.ndarray:
        """The next frame (H, W, 3) uint8 RGB; after the last, the first again."""
        try:
            frame = next(self._frames)
        except StopIteration:
            self._container.seek(0)
            self._frames = self._container.decode(video=0)
            self.loops += 1
            frame = next(self._frames, None)
            if frame is None:
                raise RuntimeError(f"{self.path}: no frame to read") from None
        return frame.to_ndarray(format="rgb24")

    def disconnect(self) -> None:
        self._container.close()
        self.is_connected = False
