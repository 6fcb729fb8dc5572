"""``iter_lines`` against a plain split, at every chunk size, long lines included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import mnemon.session.log as L


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=60).map(lambda b: bytes(c % 3 for c in b).replace(b"\x02", b"\n")),
       chunk=st.sampled_from([1, 2, 3, 5, 16, 1 << 20]), start_line=st.integers(0, 3))
def test_lines_and_offsets_match_a_plain_split(tmp_path_factory, data, chunk, start_line):
    path = tmp_path_factory.mktemp("l") / "f"
    path.write_bytes(data)
    want, off = [], 0
    for piece in data.split(b"\n")[:-1]:  # bytes after the last newline are a torn tail
        want.append((off, piece))
        off += len(piece) + 1
    start = want[start_line][0] if start_line < len(want) else 0
    want = [w for w in want if w[0] >= start]
    old = L.CHUNK
    L.CHUNK = chunk
    try:
        assert [(o, bytes(m)) for o, m in L.iter_lines(path, start)] == want
    finally:
        L.CHUNK = old
