"""Running turns: the turn runner, the agent loop, tools (Python and MCP), transcripts
and replay."""

__all__: list[str] = []
