"""``module:attr`` references resolve one way for jobs, roles and output types (decision 0342)."""

from __future__ import annotations

import pytest

from mnemon.orchestrator.importpath import ImportPathError, resolve


def test_a_module_beside_the_file_resolves_and_each_failure_is_one_line(tmp_path):
    (tmp_path / "ip_mod_0342.py").write_text("class Box:\n    def open(self):\n        pass\n"
                                            "VALUE = 3\n")
    (tmp_path / "ip_boom_0342.py").write_text("raise RuntimeError('no config here')\n")
    box = resolve("ip_mod_0342:Box", tmp_path, want_callable=True)
    assert box.__name__ == "Box" and resolve("ip_mod_0342:Box.open", tmp_path) is box.open
    assert resolve("ip_mod_0342:VALUE", tmp_path) == 3
    for ref, says in [
        ("ip_mod_0342", "'ip_mod_0342' is not an import path of the form 'module:name'"),
        (":Box", "is not an import path"),
        ("ip_nowhere_0342:x", "cannot import 'ip_nowhere_0342' (ModuleNotFoundError: "),
        ("ip_boom_0342:x", "cannot import 'ip_boom_0342' (RuntimeError: no config here)"),
        ("ip_mod_0342:Nope", "'ip_mod_0342' has no 'Nope'"),
    ]:
        with pytest.raises(ImportPathError) as e:
            resolve(ref, tmp_path)
        assert says in str(e.value) and "\n" not in str(e.value), ref
    with pytest.raises(ImportPathError, match="'ip_mod_0342:VALUE' is not callable"):
        resolve("ip_mod_0342:VALUE", tmp_path, want_callable=True)
