"""One agent's log, its context table, eviction, and the transcript door."""
