"""Guards: pure checks on a parsed reply, each returning a verdict."""
