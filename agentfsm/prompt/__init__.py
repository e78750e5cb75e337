"""What the model is sent: the contract, the projected history, tool-result framing,
the enforcement level with its schema or grammar, and the parallel-call extension.
Pure: values in, values out."""

__all__: list[str] = []
