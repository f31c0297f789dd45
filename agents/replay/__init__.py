"""Replay (feature E2): a recorded session run again under other settings, its recorded
decisions played back, and the two run reports compared."""
from agents.replay.recording import Recording, RecordingError, build_recording
from agents.replay.runner import differences, replay_runner, replay_session

__all__ = ["Recording", "RecordingError", "build_recording", "differences", "replay_runner",
           "replay_session"]
