"""The capture proxy: an OpenAI- and Anthropic-compatible endpoint that records every exchange."""
