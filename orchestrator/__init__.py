"""The Trio supervisor, the agent loop and its tools, and the CLI."""
