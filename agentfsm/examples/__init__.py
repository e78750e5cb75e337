"""Example tool sets used by ``make demo`` and the docs."""

__all__: list[str] = []
