"""The engine: every decision of a run, above the guards, the prompt, the dialects and the policies."""

__all__: list[str] = []
