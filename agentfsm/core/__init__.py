"""The pure core: messages, the backend contract's value types, state derivation, the
machine, the engine, errors. It does no IO and imports no edge (backends, protocols,
server, CLI)."""

__all__: list[str] = []
