"""Signed heads (the ``sign`` extra): written at a clean close with the user's key, checked by
``mnemon verify``; a wrong key, an edited signature and a log cut below its signed head fail."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("cryptography")

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: E402

from mnemon.orchestrator.cli import main  # noqa: E402
from mnemon.session import chain  # noqa: E402
from tests.helpers import new_agent, prompt, tool_turn  # noqa: E402


def keypair(folder, name):
    key = ed25519.Ed25519PrivateKey.generate()
    priv = folder / f"{name}.pem"
    pub = folder / f"{name}.pub.pem"
    priv.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    return priv, pub


def signed_run(run_root, tmp_path, monkeypatch):
    priv, pub = keypair(tmp_path, "me")
    monkeypatch.setenv(chain.KEY_ENV, str(priv))
    log = new_agent(run_root, "a1")
    prompt(log, "go")
    tool_turn(log, "look", "ls", "a\nb")
    log.close()
    monkeypatch.delenv(chain.KEY_ENV)
    return run_root / "agents/a1/record.jsonl", pub


def verify(capsys, *args):
    capsys.readouterr()
    code = main(["verify", *map(str, args), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_signed_head_verifies_with_its_key(run_root, tmp_path, monkeypatch, capsys):
    path, pub = signed_run(run_root, tmp_path, monkeypatch)
    sig = json.loads(path.with_name("record.jsonl.sig").read_text())
    assert sig["bytes"] == path.stat().st_size and sig["source"] == "agents/a1/record.jsonl"
    assert sig["key"] == chain.public_hex(pub)
    assert verify(capsys, run_root, "--key", pub)[0] == 0
    assert verify(capsys, run_root, "--head", "--key", pub)[0] == 0


def test_a_wrong_key_fails(run_root, tmp_path, monkeypatch, capsys):
    _, _ = signed_run(run_root, tmp_path, monkeypatch)
    _, other = keypair(tmp_path, "other")
    code, rep = verify(capsys, run_root, "--key", other)
    assert code == 1 and "signed with another key" in rep["problems"][0]["error"]


def test_an_edited_signature_or_head_fails(run_root, tmp_path, monkeypatch, capsys):
    path, pub = signed_run(run_root, tmp_path, monkeypatch)
    sigfile = path.with_name("record.jsonl.sig")
    sig = json.loads(sigfile.read_text())
    sigfile.write_text(json.dumps({**sig, "head": "0" * 64}))
    code, rep = verify(capsys, run_root, "--key", pub)
    assert code == 1 and "does not verify" in rep["problems"][0]["error"]


def test_a_log_cut_below_its_signed_head_is_truncated(run_root, tmp_path, monkeypatch, capsys):
    path, pub = signed_run(run_root, tmp_path, monkeypatch)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))
    code, rep = verify(capsys, run_root, "--head")
    assert code == 1
    assert [(p["line"], p["kind"]) for p in rep["problems"]] == [(len(lines), "truncated")]
    assert "its signature holds its head" in rep["problems"][0]["error"]


def test_an_unsigned_log_fails_when_a_key_is_required(run_root, tmp_path, capsys):
    _, pub = keypair(tmp_path, "me")
    log = new_agent(run_root, "a1")
    prompt(log, "go")
    log.close()
    code, rep = verify(capsys, run_root, "--key", pub)
    assert code == 1 and "not signed" in rep["problems"][0]["error"]
    assert verify(capsys, run_root)[0] == 0  # no key asked for: an unsigned log is fine


def test_an_unreadable_key_is_refused_before_the_agent_starts(run_root, tmp_path, monkeypatch):
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    monkeypatch.setenv(chain.KEY_ENV, str(bad))
    with pytest.raises(chain.KeyUnreadable):
        new_agent(run_root, "a1")
    assert not (run_root / "agents/a1/record.jsonl").exists()
