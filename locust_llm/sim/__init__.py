"""The simulated OpenAI-compatible LLM server: pure engine models (:mod:`.engine`) and a thin aiohttp front."""
