"""Language policies: the rules that read the conversation's words."""

__all__: list[str] = []
