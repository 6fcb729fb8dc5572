"""LLM adapters over httpx, the scripted provider, the prompt-cache and price model."""
