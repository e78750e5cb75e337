"""Model backends: the embedded model, OpenAI-compatible upstreams, scripted and replay."""
