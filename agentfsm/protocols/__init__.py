"""Wire protocols: OpenAI chat completions and Anthropic messages, both ways."""
