"""The pure core: the values every layer shares (messages, tool specs, ``ToolChoice``,
the parsed reply, the backend contract's value types, typed transcript events, the one
``RunConfig``), state derivation, the machine, errors. It does no IO and imports nothing
above it (a test checks it)."""

__all__: list[str] = []
