"""Action dialects: one module per format, plus formats models emit natively."""
