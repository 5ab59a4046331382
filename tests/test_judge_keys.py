"""A judge's API key is never rendered, logged, stored or exported (docs/security.md).

The key (a sentinel) sits in ``STUDIO_JUDGE_API_KEY``, the variable a judge configuration names.
``manage.py judge`` runs over agent_a's 12 records against a local OpenAI-compatible server that
receives the key (checked) and whose error answers echo it back, as real endpoints do ("Incorrect
API key provided: sk-…"): a 500 (retried), a 400 (the record is left unjudged) and finally a 401
(the configuration is paused with the error text). Then every page, every API read, every log
record at DEBUG, every row of the database (``dumpdata``), the command's output and every file of
an exported release are searched for the key and for its first 8 / last 6 characters.
"""
from __future__ import annotations

import io
import logging

import pytest
from django.core.management import CommandError, call_command
from support.judge_server import GOOD, FakeServer
from support.populated import all_urls, pages, populate

SENTINEL = "sk-SENTINEL-9f8e7d6c5b4a3210-KEYVALUE"
PIECES = (SENTINEL, SENTINEL[:8] + SENTINEL[8:14], SENTINEL[-6:])  # the key, and echoes of its ends


def leaks(text: str) -> list[str]:
    return [p for p in PIECES if p in text]


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


@pytest.fixture
def judged(db, maintainer, server, monkeypatch, settings, caplog, tmp_path):
    """The populated studio, judged with the keyed configuration; returns (ids, command output)."""
    from evaluation.models import JudgeConfig

    caplog.set_level(logging.DEBUG)  # every logger, the openai and httpx clients' too
    monkeypatch.setenv("STUDIO_JUDGE_API_KEY", SENTINEL)
    settings.STUDIO_JUDGE_BACKOFF_S = 0.001
    settings.STUDIO_JUDGE_MAX_RETRIES = 1
    ids = populate(maintainer)
    JudgeConfig.objects.create(name="keyed", base_url=server.base_url, model="judge-m", api_key_env="STUDIO_JUDGE_API_KEY",
                               max_concurrency=1)
    echo = {"error": {"message": f"Incorrect API key provided: {SENTINEL}", "type": "invalid_request_error"}}
    server.fail(500, echo)  # record 1: retried once …
    server.reply(GOOD)  # … then answered
    server.fail(400, echo)  # record 2: rejected, left without a verdict (job ends failed … )
    for _ in range(9):  # records 3–11
        server.reply(GOOD)
    server.fail(401, echo)  # record 12: the key is refused, the configuration paused
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="ended paused"):
        call_command("judge", "--config", "keyed", "--run", str(ids["run"].pk), "--json", stdout=out, stderr=err)
    return ids, out.getvalue() + err.getvalue()


def test_the_key_is_sent_and_nowhere_else(judged, server, client, maintainer, caplog, tmp_path):
    from evaluation.models import JudgeCall, JudgeConfig, JudgeJob, Verdict
    from releases.models import Release
    from releases.services.release_export import export_release

    ids, output = judged
    # it was used: every request carried it, as a bearer token (13 requests: 12 records + 1 retry)
    assert len(server.requests) == 13
    assert {r["headers"]["authorization"] for r in server.requests} == {f"Bearer {SENTINEL}"}
    config = JudgeConfig.objects.get(name="keyed")
    assert config.paused and "HTTP 401" in config.paused_reason and "(invalid_request_error)" in config.paused_reason
    assert "Incorrect API key provided" not in config.paused_reason  # the body's text is never echoed
    job = JudgeJob.objects.get(config=config)
    assert (job.status, job.n_ok) == ("paused", 10)  # 10 answered (records 1, 3–11)
    assert Verdict.objects.filter(source="judge").count() == 10 and JudgeCall.objects.count() == 11  # + the 400

    assert leaks(output) == [], output
    # every log record (message, arguments, traceback), at DEBUG level
    records = caplog.get_records("setup") + caplog.records  # the judge ran in the fixture
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in records)
    assert "judge judge-m: HTTP 500, retry 1/1" in logged  # the logs were captured
    assert leaks(logged) == []
    # every row of every table
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    assert '"keyed"' in dump.getvalue() and leaks(dump.getvalue()) == []
    # every page and every API read, as the maintainer
    client.force_login(maintainer)
    urls = set(pages(ids).values()) | {u for _, u in all_urls(ids)} | {
        f"/judge/jobs/{job.pk}/", f"/api/judge/jobs/{job.pk}/", "/api/judge/configs/", "/judge/configs/"}
    urls |= {f"/records/{pk}/" for pk in ids["run"].records.values_list("pk", flat=True)}
    urls |= {f"/api/records/{pk}/" for pk in ids["run"].records.values_list("pk", flat=True)}
    seen = 0
    for url in sorted(urls):
        r = client.get(url)
        if r.status_code == 200:
            seen += 1
            body = r.content.decode("utf-8", "replace") if not getattr(r, "streaming", False) else \
                b"".join(r.streaming_content).decode("utf-8", "replace")
            assert leaks(body) == [], url
    assert seen >= 60, seen
    # the judge's pause reason is on the configurations page, without the key
    assert "HTTP 401" in client.get("/judge/configs/").content.decode()
    # an exported release
    out = tmp_path / "release"
    export_release(Release.objects.get(version="1.0.0"), out)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) >= 5
    for p in files:
        assert leaks(p.read_bytes().decode("latin-1")) == [], p


@pytest.mark.django_db
def test_a_key_is_refused_as_a_variable_name(maintainer):
    """The configuration stores the variable's name; a value that looks like a key is refused."""
    from evaluation.services.judge import save_judge_config

    for value in (SENTINEL, "sk_live_0123456789abcdef", "Bearer abc.def"):
        with pytest.raises(ValueError, match="^api_key_env: "):
            save_judge_config(maintainer, name="x", base_url="http://127.0.0.1:9/v1", model="m", api_key_env=value)
    cfg = save_judge_config(maintainer, name="x", base_url="http://127.0.0.1:9/v1", model="m",
                            api_key_env="STUDIO_JUDGE_API_KEY")
    assert cfg.api_key_env == "STUDIO_JUDGE_API_KEY"
