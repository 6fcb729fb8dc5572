"""SigV4 against the published AWS Signature Version 4 test suite (fixtures/bedrock/sigv4/, as
botocore ships it; provenance in fixtures/README.md), and against botocore's own signer for a
Bedrock request whose model id is an inference profile's ARN."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from mnemon.providers.sigv4 import (Credentials, canonical_request, credentials_from_env,
                                    resolve_credentials, resolve_region, sign)

SUITE = Path(__file__).parent / "fixtures" / "bedrock" / "sigv4"
CASES = sorted(p.stem for p in SUITE.glob("*.req"))
CREDS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
TOKEN = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"
WHEN = datetime(2015, 8, 30, 12, 36, 0, tzinfo=UTC)


def _parse(raw: str) -> tuple[str, str, list[tuple[str, str]], bytes]:
    """A suite .req: request line, headers (a line starting with whitespace continues the
    previous value), a blank line, the body."""
    head, _, body = raw.partition("\n\n")
    lines = head.split("\n")
    method, rest = lines[0].split(" ", 1)
    path = rest.rsplit(" ", 1)[0]
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1].isspace() and headers:
            name, value = headers[-1]
            headers[-1] = (name, value + "," + line.strip())
            continue
        name, _, value = line.partition(":")
        headers.append((name, value))
    return method, path, headers, body.encode()


class _Multi(dict):
    """Headers with a repeated name, as the suite's duplicate-key case sends them."""


def test_the_suite_is_there():
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES)
def test_suite_vector(case):
    method, path, pairs, body = _parse((SUITE / f"{case}.req").read_text())
    merged: dict[str, str] = {}
    for name, value in pairs:  # a repeated header is one, its values joined by commas
        key = name.lower()
        if key == "x-amz-date":
            continue
        value = " ".join(value.split())
        merged[key] = f"{merged[key]},{value}" if key in merged else value
    host = merged["host"]
    creds = Credentials(CREDS.access_key, CREDS.secret_key,
                        TOKEN if "session-token" in case else None)
    out = sign(method, f"https://{host}{path}", merged, body, creds, region="us-east-1",
               service="service", now=WHEN)
    want = (SUITE / f"{case}.authz").read_text().strip()
    assert out["authorization"] == want
    assert out["x-amz-date"] == "20150830T123600Z"


def test_a_header_of_ours_not_signed_when_a_proxy_may_change_it():
    creq, signed = canonical_request("POST", "https://h/", {"host": "h", "user-agent": "x",
                                                            "content-type": "a/b"}, b"")
    assert signed == "content-type;host"


def test_matches_botocore_for_a_bedrock_arn_path(monkeypatch):
    auth = pytest.importorskip("botocore.auth")
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCreds

    url = ("https://bedrock-runtime.us-east-1.amazonaws.com/model/arn:aws:bedrock:us-east-1:"
           "123456789012:application-inference-profile%2Fjf2sje1c0jnb/invoke")
    body = b'{"anthropic_version":"bedrock-2023-05-31","max_tokens":8,"messages":[]}'
    headers = {"content-type": "application/json", "accept": "application/json"}
    monkeypatch.setattr(auth, "get_current_datetime", lambda *a, **k: WHEN.replace(tzinfo=None),
                        raising=False)
    req = AWSRequest(method="POST", url=url, headers=dict(headers), data=body)
    if not hasattr(auth, "get_current_datetime"):
        pytest.skip("this botocore reads its clock another way")
    auth.SigV4Auth(BotoCreds("AKIDEXAMPLE", CREDS.secret_key, "tok"), "bedrock",
                   "us-east-1").add_auth(req)
    ours = sign("POST", url, headers, body, Credentials("AKIDEXAMPLE", CREDS.secret_key, "tok"),
                region="us-east-1", service="bedrock", now=WHEN)
    assert ours["authorization"] == req.headers["Authorization"]


def test_credentials_from_the_environment_and_their_repr_hides_the_secret():
    env = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t",
           "AWS_SESSION_TOKEN": "tok", "AWS_REGION": "eu-west-1"}
    creds = credentials_from_env(env)
    assert creds == Credentials("AKIDEXAMPLE", "s3cr3t", "tok")
    assert "s3cr3t" not in repr(creds)
    assert resolve_credentials(env) == creds
    assert resolve_region(env) == "eu-west-1"
    assert credentials_from_env({"AWS_ACCESS_KEY_ID": "x"}) is None


def test_a_profile_through_botocore(tmp_path, monkeypatch):
    pytest.importorskip("botocore")
    (tmp_path / "credentials").write_text(
        "[team]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = fromfile\n")
    (tmp_path / "config").write_text("[profile team]\nregion = ap-southeast-2\n")
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "team")
    env = {"AWS_PROFILE": "team"}
    assert resolve_region(env) == "ap-southeast-2"
    creds = resolve_credentials(env)
    assert creds.get_frozen_credentials().access_key == "AKIDPROFILE"


def test_an_unknown_profile_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip("botocore")
    from mnemon.providers.errors import ProviderConfigError

    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_PROFILE", "nobody")
    with pytest.raises(ProviderConfigError, match="ProfileNotFound") as e:
        resolve_region({"AWS_PROFILE": "nobody"})
    assert "\n" not in str(e.value)
