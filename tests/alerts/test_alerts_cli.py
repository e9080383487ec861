"""``driftline alerts test RECEIVER`` against a real local receiver; receivers file parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from standardwebhooks import Webhook

from alerts.errors import ReceiverConfigError
from alerts.receivers import load_receivers
from alerts.signing import generate_secret
from driftline.cli import cli, main
from tests.alerts.conftest import LOOPBACK_ALLOW, ScriptedReceiver, Step


def _toml(path: Path, url: str, secret: str) -> Path:
    path.write_text(
        f'[[receivers]]\nname = "oncall"\nkind = "generic"\nurl = "{url}"\nsecret = "{secret}"\n'
        f'[[receivers]]\nname = "chat"\ntenant = "acme"\nkind = "slack"\nurl = "{url}"\n'
    )
    return path


@pytest.fixture
def loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiver listens on 127.0.0.1: the operator allows it (the collector's setting)."""
    monkeypatch.setenv("DRIFTLINE_EGRESS_ALLOW", LOOPBACK_ALLOW)


def test_alerts_test_refuses_loopback_unless_allowed(
    tmp_path: Path, receiver_server: ScriptedReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DRIFTLINE_EGRESS_ALLOW", raising=False)
    f = _toml(tmp_path / "r.toml", receiver_server.url, generate_secret())
    res = CliRunner().invoke(cli, ["alerts", "test", "oncall", "--receivers-file", str(f)])
    assert res.exit_code == 1 and "DRIFTLINE_EGRESS_ALLOW" in res.output
    assert receiver_server.requests == []


@pytest.mark.usefixtures("loopback_allowed")
def test_alerts_test_sends_signed_notification(
    tmp_path: Path, receiver_server: ScriptedReceiver
) -> None:
    secret = generate_secret()
    f = _toml(tmp_path / "receivers.toml", receiver_server.url, secret)
    res = CliRunner().invoke(
        cli, ["alerts", "test", "oncall"], env={"DRIFTLINE_ALERT_RECEIVERS_FILE": str(f)}
    )
    assert res.exit_code == 0, res.output
    assert "delivered to oncall" in res.output
    (req,) = receiver_server.requests
    body = Webhook(secret).verify(req.body, req.headers)
    assert body["type"] == "alert.firing"
    assert body["data"]["alerts"][0]["rule"] == "driftline_test"

    res = CliRunner().invoke(
        cli, ["alerts", "test", "chat", "--tenant", "acme", "--receivers-file", str(f)]
    )
    assert res.exit_code == 0, res.output
    assert "text" in json.loads(receiver_server.requests[1].body)
    assert "webhook-signature" not in receiver_server.requests[1].headers  # no secret: unsigned


@pytest.mark.usefixtures("loopback_allowed")
def test_alerts_test_reports_failure(tmp_path: Path, receiver_server: ScriptedReceiver) -> None:
    receiver_server.script = [Step(400)]
    f = _toml(tmp_path / "r.toml", receiver_server.url, generate_secret())
    res = CliRunner().invoke(cli, ["alerts", "test", "oncall", "--receivers-file", str(f)])
    assert res.exit_code == 1 and "HTTP 400" in res.output
    res = CliRunner().invoke(cli, ["alerts", "test", "nobody", "--receivers-file", str(f)])
    assert res.exit_code == 1 and "default/oncall" in res.output


def test_missing_receivers_file_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DRIFTLINE_ALERT_RECEIVERS_FILE", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["alerts", "test", "oncall"])
    assert exc.value.code == 2
    assert "DRIFTLINE_ALERT_RECEIVERS_FILE" in capsys.readouterr().err


def test_yaml_receivers_and_validation(tmp_path: Path) -> None:
    y = tmp_path / "r.yaml"
    y.write_text(
        "receivers:\n  - name: pd\n    kind: pagerduty\n    url: https://events.pagerduty.com/v2/enqueue\n"
        "    routing_key: " + "k" * 32 + "\n"
    )
    rcv = load_receivers(y).get("default", "pd")
    assert rcv is not None and rcv.kind == "pagerduty"
    y.write_text("receivers:\n  - name: pd\n    kind: pagerduty\n    url: https://x\n")
    with pytest.raises(ReceiverConfigError, match="routing_key"):
        load_receivers(y)
    y.write_text("receivers:\n  - name: a\n    url: https://x\n    secret: nope\n")
    with pytest.raises(ReceiverConfigError, match="whsec_"):
        load_receivers(y)
    with pytest.raises(ReceiverConfigError, match="DRIFTLINE_ALERT_RECEIVERS_FILE"):
        load_receivers(tmp_path / "absent.toml")
