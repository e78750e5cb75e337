"""Running turns: the turn runner, the agent loop, tools (Python and MCP), the run
recorder and transcript files."""

__all__: list[str] = []
