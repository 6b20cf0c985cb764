"""The simulated OpenAI-compatible LLM server: pure engine models and a thin aiohttp front (docs/simulator.md)."""
