"""Replay: a recorded transcript run again through today's code, and compared."""

__all__: list[str] = []
