"""The constants of DESIGN.md, in one place."""

OPENING_CHARS = 50
NOTE_MAX_BYTES = 240
GREP_HITS = 100
GREP_LINE_BYTES = 200
GREP_TIMEOUT_S = 5.0
RESERVE_SHARE = 0.15
RESERVE_FLOOR_TOKENS = 16_384
EVICT_THRESHOLD_BYTES = 500 * 1024
KEEP = 0.5
KEEP_FLOOR_TOKENS = 6500  # under keep "auto": the verbatim floor, the most compaction restores
# verbatim (decisions 0220, 0222)
MAX_TURNS = 250
DIGEST_BYTES = 8
RESIDUE_MAX_BYTES = 800
BYTES_PER_TOKEN_DEFAULT = 4

BLOCK_LISTED_BYTES = 2048
"""Blocks at least this large are listed in an index row (``blocks``), for mark-and-sweep."""
