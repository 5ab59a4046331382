"""Notifications for people and webhooks for systems (``docs/notifications.md``).

People: a reviewer returns a task → its author has a notification with the reason, the bell on every
page counts it (one query), the list page shows it, marking it read clears the count, e-mail goes out
after commit; settings (API and page) mute a type. Receivers of the other events: the reviewers of a
submitted task, the author and commenters of a comment, the author of a failed replay or a changed
gold (Florence tile 18), the other maintainers of a published release (its digest) and of an
imported run, who started a judge job. Blind: an adjudicator who still scores a record blind gets its
``adjudication.needed`` without the agent and without the disagreement (the verdicts); one who is
not blind gets both (``evaluation.blind`` is the rule).

Systems: a real HTTP receiver on 127.0.0.1 (``http.server`` in a thread; its signature check is
written here from the Standard Webhooks spec, not the studio's ``sign``) verifies every delivery,
answers 503 twice then 200 (three attempts, one ``webhook-id``, backoff 30 s then 60 s: the
defaults, ``STUDIO_WEBHOOK_BACKOFF_S`` × 2^(n−1)), 400 once (no retry), and receives a redelivery asked
for through the API. Egress: loopback, link-local and hosts outside the allow-list are refused. A
delivery whose worker died (a real process that exited; and ``manage.py send_webhooks`` SIGKILLed
while the receiver holds its request) and one whose after-commit send never ran are sent by the
sweep. A webhook that keeps failing is disabled and its owner told.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import signal
import subprocess
import sys
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import REPO, SCORING_EXAMPLES, ChildDatabase, needs_shared
from django.core import mail
from django.utils import timezone
from support.children import child_env
from support.judging import GOOD

from annotation.models import Event, Task, TaskRevision
from evaluation.models import ScoringItem
from evaluation.services.queue import claim_item, enqueue_records, submit_item
from evaluation.services.runs import import_run_dir
from kernel.egress import address_problem, host_allowed
from kernel.processes import process_tag
from notifications import services as svc
from notifications.models import Notification, Webhook, WebhookAttempt, WebhookDelivery
from studio.background import sweep_jobs

CODES = ("E1", "E2", "E3", "E4", "E5", "E6")


def flags(*on: str) -> dict:
    return {c: c in on for c in CODES}


class Receiver:
    """A webhook receiver on 127.0.0.1: answers the scripted statuses in turn (then 200) and keeps
    every request ``{"headers", "body", "valid"}``; ``valid``: the Standard Webhooks signature checks
    out with ``secret`` (set once the webhook exists)."""

    def __init__(self):
        self.script, self.seen, self.secret, self.reply = [], [], "", b"ok"
        self.hold_first = False  # True: the first request waits (until released) before it is answered
        self.arrived, self.release = threading.Event(), threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                outer.seen.append({"headers": dict(self.headers), "body": body, "valid": outer.verify(self.headers, body)})
                if outer.hold_first and len(outer.seen) == 1:
                    outer.arrived.set()
                    outer.release.wait(60)
                code = outer.script.pop(0) if outer.script else 200
                self.send_response(code)
                self.end_headers()
                self.wfile.write(outer.reply)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def verify(self, headers, body: bytes) -> bool:
        """The spec's check: base64(HMAC-SHA256(key, f"{id}.{timestamp}.{body}")) among the ``v1,`` signatures."""
        key = base64.b64decode(self.secret.removeprefix("whsec_"))
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        return any(s == f"v1,{expected}" for s in headers["webhook-signature"].split(" "))

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings):
    settings.STUDIO_WEBHOOK_PRIVATE_HOSTS = ["127.0.0.1"]  # the test receiver: allowed by name only
    settings.STUDIO_JUDGE_RUNNER = "inline"
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def people(make_user):
    ada = make_user("ada", "author")
    ada.email = "ada@example.org"
    ada.save(update_fields=["email"])
    return {"ada": ada, "rey": make_user("rey", "reviewer"), "max": make_user("max", "maintainer"),
            "ben": make_user("ben", "author")}


@pytest.fixture
def task(people):
    """ada's submitted task (the status set directly: submitting needs a replay, not under test here)."""
    event = Event.objects.create(slug="joplin", name="Joplin")
    task = Task.objects.create(event=event, sample_id="s0", question_id="s0_task0", dimension="t2",
                               status=Task.Status.SUBMITTED, created_by=people["ada"])
    head = TaskRevision.objects.create(task=task, number=1, question="How many buildings?", author=people["ada"])
    Task.objects.filter(pk=task.pk).update(head=head, version=1)
    task.refresh_from_db()
    return task


def _return(client, reviewer, task, reason="the buffer must be 20 m, not 200 m"):
    client.force_login(reviewer)
    resp = client.post(f"/api/tasks/{task.pk}/transitions/", {"action": "return", "reason": reason},
                       content_type="application/json")
    assert resp.status_code == 200, resp.content
    return resp


# ------------------------------------------------------------------ people

def test_a_returned_task_notifies_its_author_with_the_reason_and_the_bell_counts_it(
        client, people, task, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        _return(client, people["rey"], task)
    [n] = Notification.objects.all()
    assert (n.user, n.event_type, n.url) == (people["ada"], "task.returned", f"/tasks/{task.pk}/")
    assert n.text == "rey returned s0_task0: the buffer must be 20 m, not 200 m"
    assert n.data["reason"] == "the buffer must be 20 m, not 200 m" and n.data["actor"] == "rey"
    # e-mail after commit (locmem backend in tests), to the author only
    assert [m.to for m in mail.outbox] == [["ada@example.org"]] and "20 m, not 200 m" in mail.outbox[0].body
    # the bell on any page, the list page
    client.force_login(people["ada"])
    page = client.get("/tasks/").content.decode()
    assert 'data-unread="1"' in page
    listing = client.get("/notifications/").content.decode()
    assert "the buffer must be 20 m, not 200 m" in listing
    # opening it marks it read and goes to the task
    resp = client.post(f"/notifications/{n.pk}/read/", {"open": "1"})
    assert resp.status_code == 302 and resp["Location"] == f"/tasks/{task.pk}/"
    assert 'data-unread="0"' in client.get("/notifications/").content.decode()
    # nobody else heard of it (ben is an author of nothing here, rey acted)
    assert Notification.objects.filter(user__in=[people["ben"], people["rey"], people["max"]]).count() == 0


def test_the_bell_is_one_query(client, people, task, django_assert_num_queries):
    from django.template import Context, Template
    from django.test import RequestFactory

    request = RequestFactory().get("/")
    request.user = people["ada"]
    tpl = Template("{% load notifications_bell %}{% notification_bell %}")
    with django_assert_num_queries(1):
        html = tpl.render(Context({"request": request}))
    assert 'data-unread="0"' in html


def test_mark_read_one_and_all_through_the_api_touches_only_your_own(client, people, task):
    _return(client, people["rey"], task, "first")
    Task.objects.filter(pk=task.pk).update(status=Task.Status.SUBMITTED)
    _return(client, people["rey"], task, "second")
    other = Notification.objects.create(user=people["ben"], event_type="task.returned", event_id="e", text="x")
    client.force_login(people["ada"])
    body = client.get("/api/notifications/?unread=1").json()
    assert [r["data"]["reason"] for r in body["results"]] == ["second", "first"]
    first_id = body["results"][1]["id"]
    assert client.post("/api/notifications/read/", {"ids": [first_id, other.pk]},
                       content_type="application/json").json() == {"marked": 1}
    assert client.post("/api/notifications/read/", {"all": True}, content_type="application/json").json() == {"marked": 1}
    other.refresh_from_db()
    assert other.read_at is None


def test_a_muted_event_type_is_not_notified(client, people, task):
    client.force_login(people["ada"])
    resp = client.put("/api/notifications/settings/", {"muted": ["task.returned"], "email": False},
                      content_type="application/json")
    assert resp.json() == {"muted": ["task.returned"], "email": False}
    assert client.put("/api/notifications/settings/", {"muted": ["no.such"], "email": False},
                      content_type="application/json").status_code == 400
    _return(client, people["rey"], task)
    assert Notification.objects.count() == 0


def test_submitting_notifies_the_reviewers_but_not_the_author(client, people, task):
    from annotation.services import review

    Task.objects.filter(pk=task.pk).update(status=Task.Status.RETURNED)
    task.refresh_from_db()
    review._record(task, people["ada"], "submit", Task.Status.SUBMITTED, "")  # the writer submit uses, past its replay check
    assert sorted(Notification.objects.values_list("user__username", flat=True)) == ["max", "rey"]


@pytest.fixture
def disagreement(db, make_user, maintainer):
    """agent-SECRET-model's run; record r0 with three queue slots: rex (a reviewer, so an
    adjudicator) holds slot 3 and is blind on r0; ana and bo (scorers) give verdicts that disagree."""
    run = import_run_dir(maintainer, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent-SECRET-model",
                         tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    r0 = run.records.order_by("id").first()
    enqueue_records(maintainer, [r0], 3)
    ana, bo, rex, rita = (make_user("ana", "scorer"), make_user("bo", "scorer"), make_user("rex", "reviewer"),
                          make_user("rita", "reviewer"))
    claim_item(rex, ScoringItem.objects.get(record=r0, slot=3))
    submit_item(ana, claim_item(ana, ScoringItem.objects.get(record=r0, slot=1)), errors=flags(), grade=1.0)
    assert not Notification.objects.filter(event_type="adjudication.needed").exists()  # one verdict: nothing yet
    submit_item(bo, claim_item(bo, ScoringItem.objects.get(record=r0, slot=2)), errors=flags("E2"), grade=0.2)
    return {"r0": r0, "rex": rex, "rita": rita, "ana": ana}


def test_a_blind_adjudicator_is_told_of_a_disagreement_without_agent_or_verdicts(disagreement):
    rex = Notification.objects.get(user=disagreement["rex"], event_type="adjudication.needed")
    rita = Notification.objects.get(user=disagreement["rita"], event_type="adjudication.needed")
    assert rex.data["agent"] is None and rex.data["reasons"] is None
    assert "SECRET" not in rex.text + json.dumps(rex.data)
    assert rex.data["question_id"] == disagreement["r0"].question_id
    # rita holds no slot: a reviewer sees the agent and why the verdicts disagree
    assert rita.data["agent"] == "agent-SECRET-model" and rita.data["reasons"]
    assert not Notification.objects.filter(user=disagreement["ana"], event_type="adjudication.needed").exists()


def test_an_imported_run_notifies_the_other_maintainers(db, make_user, maintainer):
    other = make_user("moe", "maintainer")
    run = import_run_dir(maintainer, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent-a", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    [n] = Notification.objects.filter(event_type="run.scored")
    assert (n.user, n.url, n.data["agent"], n.data["n_records"]) == (other, f"/runs/{run.pk}/", "agent-a", run.records.count())
    assert n.data["dora_score"] == run.dora_score


# ------------------------------------------------------------------ egress

def test_egress_rules_refuse_loopback_link_local_and_private_addresses():
    assert address_problem("127.0.0.1") == "127.0.0.1 is a loopback address"
    assert address_problem("169.254.169.254") == "169.254.169.254 is a link-local address"
    assert address_problem("10.1.2.3") == "10.1.2.3 is a private address"
    assert address_problem("::ffff:192.168.0.1") == "::ffff:192.168.0.1 is a private address"
    assert address_problem("93.184.216.34") is None
    assert host_allowed("hooks.example.org", [".example.org"]) and not host_allowed("example.org.evil", [".example.org"])


@pytest.mark.parametrize("url, settings_over, problem", [
    ("http://127.0.0.1:9/hook", {}, "127.0.0.1 is a loopback address"),
    ("http://169.254.169.254/latest/meta-data/", {}, "169.254.169.254 is a link-local address"),
    ("http://10.0.0.5/", {}, "10.0.0.5 is a private address"),
    ("https://ci.example.org/", {"STUDIO_WEBHOOK_ALLOWED_HOSTS": ["hooks.example.com"]}, "is not an allowed host"),
    ("ftp://ci.example.org/", {}, "scheme 'ftp'"),
    ("http://user:pw@127.0.0.1/", {"STUDIO_WEBHOOK_PRIVATE_HOSTS": ["127.0.0.1"]}, "credentials"),
])
def test_a_webhook_to_a_forbidden_address_is_refused(client, people, settings, url, settings_over, problem):
    for k, v in settings_over.items():
        setattr(settings, k, v)
    client.force_login(people["max"])
    resp = client.post("/api/webhooks/", {"url": url, "event_types": ["task.returned"]}, content_type="application/json")
    assert resp.status_code == 400 and problem in resp.json()["detail"], resp.json()
    assert Webhook.objects.count() == 0


# ------------------------------------------------------------------ webhooks

def _register(client, people, receiver, types=("task.returned", "webhook.ping")):
    client.force_login(people["max"])
    resp = client.post("/api/webhooks/", {"url": receiver.url, "event_types": list(types)}, content_type="application/json")
    assert resp.status_code == 201, resp.content
    receiver.secret = resp.json()["secret"]
    return resp.json()["id"]


def _make_due(delivery_id):
    WebhookDelivery.objects.filter(pk=delivery_id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


def test_deliveries_are_signed_retried_after_503_twice_and_logged(
        client, people, task, receiver, django_capture_on_commit_callbacks):
    _register(client, people, receiver)
    receiver.script = [503, 503]
    with django_capture_on_commit_callbacks(execute=True):
        _return(client, people["rey"], task, "fix step 2")
    [d] = WebhookDelivery.objects.all()
    assert (d.status, d.attempts) == ("pending", 1)
    first_wait = (d.next_attempt_at - d.attempt_log.get().at).total_seconds()
    _make_due(d.pk)
    assert svc.send_due() == 1
    d.refresh_from_db()
    second_wait = (d.next_attempt_at - d.attempt_log.last().at).total_seconds()
    _make_due(d.pk)
    assert svc.send_due() == 1
    d.refresh_from_db()
    assert (d.status, d.attempts) == ("succeeded", 3)
    assert 29 <= first_wait <= 31 and 59 <= second_wait <= 61  # 30 s × 2^(n-1)
    assert [(a.status_code, a.retry) for a in d.attempt_log.all()] == [(503, True), (503, True), (200, False)]
    assert len(receiver.seen) == 3 and all(s["valid"] for s in receiver.seen)
    assert len({s["headers"]["webhook-id"] for s in receiver.seen}) == 1  # one message, three attempts
    body = json.loads(receiver.seen[0]["body"])
    assert (body["type"], body["version"], body["data"]["reason"]) == ("task.returned", 1, "fix step 2")
    assert Webhook.objects.get().consecutive_failures == 0  # reset by the success
    # a tampered body fails the receiver's check (the check is not vacuous)
    assert not receiver.verify(receiver.seen[0]["headers"], receiver.seen[0]["body"] + b" ")


def test_a_400_is_not_retried_and_a_redelivery_from_the_api_arrives(
        client, people, task, receiver, django_capture_on_commit_callbacks):
    hook_id = _register(client, people, receiver)
    receiver.script = [400]
    receiver.reply = f"bad request; your secret is {receiver.secret}".encode()
    with django_capture_on_commit_callbacks(execute=True):
        _return(client, people["rey"], task)
    [d] = WebhookDelivery.objects.all()
    assert (d.status, d.attempts) == ("failed", 1)
    [a] = d.attempt_log.all()
    assert (a.status_code, a.retry) == (400, False)
    assert receiver.secret not in a.response_excerpt and "[secret]" in a.response_excerpt
    _make_due(d.pk)
    assert svc.send_due() == 0 and len(receiver.seen) == 1
    # the API's log shows it; a redelivery sends the same message again
    client.force_login(people["max"])
    log = client.get(f"/api/webhooks/{hook_id}/deliveries/").json()["results"]
    assert [x["attempt_log"][0]["status_code"] for x in log] == [400]
    receiver.reply = b"ok"
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(f"/api/webhook-deliveries/{d.pk}/redeliver/")
    assert resp.status_code == 202
    assert len(receiver.seen) == 2 and receiver.seen[1]["valid"]
    assert receiver.seen[1]["headers"]["webhook-id"] == receiver.seen[0]["headers"]["webhook-id"]
    assert receiver.seen[1]["body"] == receiver.seen[0]["body"]
    assert WebhookDelivery.objects.get(pk=resp.json()["id"]).status == "succeeded"


def test_ping_from_the_api_and_another_maintainers_webhook_is_not_found(
        client, people, receiver, make_user, django_capture_on_commit_callbacks):
    hook_id = _register(client, people, receiver)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/api/webhooks/{hook_id}/ping/").status_code == 202
    assert json.loads(receiver.seen[0]["body"])["type"] == "webhook.ping" and receiver.seen[0]["valid"]
    client.force_login(make_user("meg", "maintainer"))
    assert client.post(f"/api/webhooks/{hook_id}/ping/").status_code == 404
    assert client.get(f"/api/webhooks/{hook_id}/deliveries/").status_code == 404
    client.force_login(people["rey"])  # a reviewer may not register one
    assert client.post("/api/webhooks/", {"url": receiver.url, "event_types": ["task.returned"]},
                       content_type="application/json").status_code == 403


def test_the_sweep_sends_what_a_killed_worker_or_a_lost_commit_hook_left(client, people, task, receiver):
    _register(client, people, receiver)
    _return(client, people["rey"], task)  # committed in the test's transaction; the after-commit send never runs
    [d] = WebhookDelivery.objects.all()
    assert d.status == "pending" and receiver.seen == []
    # a worker that claimed it and died: a real process, gone
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    WebhookDelivery.objects.filter(pk=d.pk).update(status="sending", worker=process_tag(dead.pid),
                                                   heartbeat_at=timezone.now())
    rows = sweep_jobs(kinds=[svc.KIND])
    assert [(r["id"], r["action"]) for r in rows] == [(d.pk, "requeued")]
    d.refresh_from_db()
    assert d.status == "succeeded" and len(receiver.seen) == 1 and receiver.seen[0]["valid"]


def test_a_webhook_that_keeps_failing_is_disabled_and_its_owner_told(
        client, people, task, receiver, settings, django_capture_on_commit_callbacks):
    settings.STUDIO_WEBHOOK_DISABLE_AFTER = 2
    _register(client, people, receiver)
    receiver.script = [500, 502]
    with django_capture_on_commit_callbacks(execute=True):
        _return(client, people["rey"], task)
    d = WebhookDelivery.objects.get()
    _make_due(d.pk)
    svc.send_due()
    hook = Webhook.objects.get()
    assert not hook.active and hook.disabled_reason.startswith("2 failed attempts in a row")
    told = Notification.objects.get(user=people["max"], event_type="webhook.disabled")
    assert told.url == f"/webhooks/{hook.pk}/" and receiver.url in told.text
    _make_due(d.pk)
    svc.send_due()  # a disabled webhook is not called again
    assert len(receiver.seen) == 2


def test_the_webhook_pages_show_the_log_and_redeliver(client, people, task, receiver, django_capture_on_commit_callbacks):
    hook_id = _register(client, people, receiver)
    with django_capture_on_commit_callbacks(execute=True):
        _return(client, people["rey"], task)
    client.force_login(people["max"])
    assert receiver.url in client.get("/webhooks/").content.decode()
    page = client.get(f"/webhooks/{hook_id}/").content.decode()
    assert "task.returned" in page and "succeeded" in page
    d = WebhookDelivery.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/webhook-deliveries/{d.pk}/redeliver/").status_code == 302
    assert len(receiver.seen) == 2
    client.force_login(people["rey"])
    assert client.get(f"/webhooks/{hook_id}/").status_code == 404


def test_event_types_are_listed_with_their_versions(client, people):
    client.force_login(people["ada"])
    rows = {r["name"]: r for r in client.get("/api/event-types/").json()}
    assert rows["task.returned"]["version"] == 1 and "reason" in rows["task.returned"]["keys"]
    assert rows["release.published"]["keys"][:2] == ["version", "manifest_sha256"]


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_delivery_loses_nothing(tmp_path, maintainer, receiver, settings):
    """The issue's attack: ``manage.py send_webhooks`` (a worker) is killed with SIGKILL while the
    receiver holds its request unanswered. The delivery is left ``sending`` with the dead worker's
    tag; ``manage.py sweep_jobs`` puts it back to pending at once (the pid is gone) and sends it: the
    receiver gets the same message (one ``webhook-id``, valid signatures) a second time and answers."""
    from studio.events import EVENT_TYPES

    hook = Webhook.objects.create(created_by=maintainer, url=receiver.url, event_types=["release.published"],
                                  secret=svc.new_secret())
    receiver.secret, receiver.hold_first = hook.secret, True
    body = svc.event_body("evt_kill", EVENT_TYPES["release.published"], {"version": "1.0.0"}, timezone.now())
    d = WebhookDelivery.objects.create(webhook=hook, message_id="msg_kill", event_type="release.published", body=body,
                                       next_attempt_at=timezone.now())
    db = ChildDatabase(tmp_path)
    env = {**child_env(db, tmp_path), "STUDIO_JUDGE_RUNNER": "inline", "STUDIO_WEBHOOK_PRIVATE_HOSTS": "127.0.0.1"}
    worker = subprocess.Popen([sys.executable, str(REPO / "manage.py"), "send_webhooks"], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert receiver.arrived.wait(120), worker.stderr.read().decode()[-2000:]
        (status, tag), = db.rows("select status, worker from notifications_webhookdelivery where id = %s", d.pk)
        assert (status, tag) == ("sending", process_tag(worker.pid))
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
    receiver.release.set()
    out = subprocess.run([sys.executable, str(REPO / "manage.py"), "sweep_jobs", "--json"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    mine = [r for r in json.loads(out.stdout) if r["kind"] == svc.KIND]
    assert mine == [{"kind": svc.KIND, "id": d.pk, "action": "requeued",
                     "why": f"its worker process ({worker.pid}) is gone", "removed": []}]
    assert db.rows("select status, attempts from notifications_webhookdelivery where id = %s", d.pk) == [("succeeded", 1)]
    assert len(receiver.seen) == 2 and all(s["valid"] for s in receiver.seen)
    assert {s["headers"]["webhook-id"] for s in receiver.seen} == {"msg_kill"}


def test_patching_a_webhook_checks_a_new_url_but_switching_it_off_needs_no_lookup(client, people, receiver, settings):
    hook_id = _register(client, people, receiver)
    bad = client.patch(f"/api/webhooks/{hook_id}/", {"url": "http://169.254.169.254/"}, content_type="application/json")
    assert bad.status_code == 400 and "link-local" in bad.json()["detail"]
    settings.STUDIO_WEBHOOK_PRIVATE_HOSTS = []  # the receiver's host is refused from now on
    Webhook.objects.filter(pk=hook_id).update(consecutive_failures=7)
    off = client.patch(f"/api/webhooks/{hook_id}/", {"active": False}, content_type="application/json")
    assert off.status_code == 200 and off.json()["active"] is False
    on = client.patch(f"/api/webhooks/{hook_id}/", {"active": True}, content_type="application/json")
    assert (on.json()["active"], on.json()["consecutive_failures"], on.json()["url"]) == (True, 0, receiver.url)


def test_publishing_a_release_tells_the_other_maintainers_and_the_webhook_its_digest(
        client, make_user, maintainer, receiver, people, django_capture_on_commit_callbacks):
    from releases.services import lifecycle, release_import

    release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), make_release=False)  # 12 approved tasks
    _register(client, people, receiver, types=("release.published",))  # max's webhook
    release = lifecycle.create_release(maintainer, "1.0.0", "first")
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.publish_release(maintainer, release)
    release.refresh_from_db()
    n = Notification.objects.get(user=people["max"], event_type="release.published")
    assert (n.data["version"], n.data["manifest_sha256"], n.data["n_tasks"]) == ("1.0.0", release.manifest_sha256, 12)
    assert n.url == "/releases/1.0.0/" and release.manifest_sha256[:12] in n.text
    assert not Notification.objects.filter(user=maintainer, event_type="release.published").exists()  # mia published
    [seen] = receiver.seen
    assert seen["valid"] and json.loads(seen["body"])["data"]["manifest_sha256"] == release.manifest_sha256


def test_a_finished_judge_job_tells_who_started_it(run_a, judge_config, judge_server, make_user):
    from evaluation.models import JudgeJob
    from evaluation.services.judge import run_judge_job

    starter = make_user("jo", "maintainer")
    record = run_a.records.order_by("id").first()
    job = JudgeJob.objects.create(config=judge_config, record_ids=[record.pk], total=1, created_by=starter, with_code=False)
    judge_server.reply(GOOD)
    assert run_judge_job(job.pk).status == "done"
    n = Notification.objects.get(user=starter, event_type__startswith="judge.")
    assert (n.event_type, n.data["job_id"], n.data["n_ok"], n.data["n_failed"]) == ("judge.finished", job.pk, 1, 0)
    assert n.url == f"/judge/jobs/{job.pk}/" and n.text == f"judge job {job.pk} (local) done: 1 ok, 0 failed"


def test_a_judge_job_paused_by_a_refused_key_tells_who_started_it_why(run_a, judge_config, judge_server, make_user):
    """The endpoint answers 401 (a refused key: ``evaluation.judge.backend`` raises a configuration
    error, never retried), so the configuration is paused and the job ends ``paused``: its starter
    hears of it with the configuration's reason, and nothing else is announced."""
    from evaluation.models import JudgeJob
    from evaluation.services.judge import run_judge_job

    starter = make_user("jo", "maintainer")
    record = run_a.records.order_by("id").first()
    job = JudgeJob.objects.create(config=judge_config, record_ids=[record.pk], total=1, created_by=starter, with_code=False)
    judge_server.fail(401)
    assert run_judge_job(job.pk).status == "paused"
    judge_config.refresh_from_db()
    assert judge_config.paused and judge_config.paused_reason
    [n] = Notification.objects.filter(user=starter)
    assert (n.event_type, n.data["job_id"], n.data["status"], n.data["n_ok"], n.data["reason"]) == (
        "judge.paused", job.pk, "paused", 0, judge_config.paused_reason)
    assert n.url == f"/judge/jobs/{job.pk}/"
    assert n.text == (f"judge job {job.pk} (local) paused after 0 ok: {judge_config.paused_reason}; "
                      "resume the configuration, then run the job again")


def test_a_failed_replay_and_a_changed_gold_tell_the_task_author(make_user, maintainer):
    """Florence tile 18 (tests/test_replay_services.py has the hand-worked values): a null pixel size
    fails step 1; clearing the destroyed pixels after a person accepted the gold changes the answer,
    which then waits for acceptance."""
    from conftest import REALDATA
    from support.replay import ANSWER, STEPS, clear_destroyed

    from annotation.services.imports import import_xbd_folder
    from annotation.services.tasks import create_task
    from replay.services.gold import accept_gold
    from replay.services.runs import start_replay

    florence = import_xbd_folder(needs_shared(REALDATA / "xbd-hurricane-florence")).event
    ada = make_user("ada", "author")
    broken = create_task(ada, florence, dimension="t1", content={
        "question": "q", "input_data": {}, "answer_spec": ANSWER,
        "trajectory": [STEPS[0], {**STEPS[1], "args": {**STEPS[1]["args"], "pixel_size_m": None}}]})
    run = start_replay(ada, broken)
    assert run.status == "failed"
    n = Notification.objects.get(user=ada, event_type="replay.failed")
    assert (n.data["replay_id"], n.data["error"], n.url) == (run.pk, run.error, f"/tasks/{broken.pk}/")
    assert n.data["error"].startswith("step 1 (ras.area), argument 'pixel_size_m':")

    task = create_task(ada, florence, dimension="t1", content={
        "question": "What area do damaged buildings cover?", "input_data": {}, "trajectory": STEPS, "answer_spec": ANSWER})
    accept_gold(maintainer, start_replay(ada, task))
    assert not Notification.objects.filter(event_type="gold.changed").exists()  # the first gold is taken by itself
    clear_destroyed(florence)
    new = start_replay(ada, task)
    assert not new.gold_accepted
    n = Notification.objects.get(user=ada, event_type="gold.changed")
    assert (n.data["replay_id"], n.url) == (new.pk, f"/tasks/{task.pk}/")


def test_a_comment_reaches_the_task_author_and_a_reply_the_commenters(people, task):
    from annotation.services import review

    first = review.add_comment(people["rey"], task, "step 2: why 200 m?")
    n = Notification.objects.get(event_type="task.commented")
    assert (n.user, n.data["comment_id"], n.data["body"]) == (people["ada"], first.pk, "step 2: why 200 m?")
    review.add_comment(people["ada"], task, "fixed, 20 m", parent=first)
    assert sorted(Notification.objects.filter(event_type="task.commented").values_list("user__username", "text")) == [
        ("ada", "rey commented on s0_task0: step 2: why 200 m?"), ("rey", "ada commented on s0_task0: fixed, 20 m")]


def test_the_settings_form_mutes_the_unchecked_types(client, people, task):
    from studio.events import EVENT_TYPES

    client.force_login(people["ada"])
    wanted = [t for t in EVENT_TYPES if t not in ("task.returned", "webhook.ping")]
    assert client.post("/notifications/settings/", {"types": wanted}).status_code == 302  # e-mail unchecked
    page = client.get("/notifications/").content.decode()
    assert 'value="task.returned">' in page and 'value="task.approved" checked>' in page
    _return(client, people["rey"], task)
    assert Notification.objects.count() == 0
    from notifications.models import NotificationSetting

    assert NotificationSetting.objects.get(user=people["ada"]).muted == ["task.returned"]
    assert NotificationSetting.objects.get(user=people["ada"]).email is False


def test_a_judge_job_the_sweep_ends_tells_who_started_it(judge_config, make_user):
    from evaluation.models import JudgeJob
    from evaluation.services.judge import sweep_judge_jobs

    starter = make_user("jo", "maintainer")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    job = JudgeJob.objects.create(config=judge_config, record_ids=[1], total=1, created_by=starter, status="running",
                                  worker=process_tag(dead.pid), heartbeat_at=timezone.now())
    assert [r["action"] for r in sweep_judge_jobs(600)] == ["failed"]
    n = Notification.objects.get(user=starter)
    assert (n.event_type, n.data["job_id"], n.data["status"]) == ("judge.failed", job.pk, "failed")


def test_a_disagreement_through_the_record_api_is_announced_too(db, make_user, maintainer, client):
    """Two verdicts given on the record page (its form posts to ``/api/records/<id>/verdicts/``)
    that disagree (correct and E2: plan correctness differs) tell the adjudicators, as the queue does."""
    run = import_run_dir(maintainer, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent-x", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    r0 = run.records.order_by("id").first()
    rita = make_user("rita", "reviewer")
    for name, errors, grade in (("ana", flags(), 1.0), ("bo", flags("E2"), 0.2)):
        client.force_login(make_user(name, "scorer"))
        body = {"errors": errors, "grade": grade, "final": True}
        assert client.post(f"/api/records/{r0.pk}/verdicts/", body, content_type="application/json").status_code == 201
        if name == "ana":  # one verdict: nothing to adjudicate yet
            assert not Notification.objects.filter(event_type="adjudication.needed").exists()
    note = Notification.objects.get(user=rita, event_type="adjudication.needed")
    assert note.data["question_id"] == r0.question_id


def test_the_sweep_prunes_old_read_notifications_and_finished_deliveries_only(people, task, settings):
    """Retention (docs/notifications.md): with 90 and 30 days, a notification read 91 days ago goes and
    one read 89 days ago stays; an unread one of 400 days stays; a delivery finished 31 days ago goes
    with its attempts, one finished 29 days ago stays, and a pending one of 400 days stays. Counted by
    hand: 1 notification and 1 delivery (its 2 attempts with it) deleted."""
    settings.STUDIO_NOTIFICATION_RETENTION_DAYS, settings.STUDIO_WEBHOOK_LOG_RETENTION_DAYS = 90, 30
    now = timezone.now()
    ada = people["ada"]
    old_read, new_read, old_unread = (Notification.objects.create(user=ada, event_type="task.returned",
                                                                   event_id=f"e{i}", text="t") for i in range(3))
    Notification.objects.filter(pk=old_read.pk).update(read_at=now - timedelta(days=91))
    Notification.objects.filter(pk=new_read.pk).update(read_at=now - timedelta(days=89))
    Notification.objects.filter(pk=old_unread.pk).update(created_at=now - timedelta(days=400))
    hook = Webhook.objects.create(created_by=people["max"], url="https://example.org/h", secret="whsec_x")

    def delivery(status, finished_days):
        d = WebhookDelivery.objects.create(webhook=hook, message_id=f"m{status}{finished_days}", event_type="webhook.ping",
                                           body="{}", status=status, next_attempt_at=now)
        if finished_days is not None:
            WebhookDelivery.objects.filter(pk=d.pk).update(finished_at=now - timedelta(days=finished_days))
        return d
    gone = delivery(WebhookDelivery.Status.SUCCEEDED, 31)
    WebhookAttempt.objects.create(delivery=gone, status_code=503, retry=True)
    WebhookAttempt.objects.create(delivery=gone, status_code=200)
    kept_failed = delivery(WebhookDelivery.Status.FAILED, 29)
    pending = delivery(WebhookDelivery.Status.PENDING, None)
    WebhookDelivery.objects.filter(pk=pending.pk).update(created_at=now - timedelta(days=400),
                                                         next_attempt_at=now + timedelta(days=1))

    assert svc.prune(now) == {"notifications": 1, "deliveries": 1}
    assert set(Notification.objects.filter(user=ada, event_id__in=["e0", "e1", "e2"]).values_list("event_id", flat=True)
               ) == {"e1", "e2"}
    assert set(WebhookDelivery.objects.values_list("pk", flat=True)) == {kept_failed.pk, pending.pk}
    assert not WebhookAttempt.objects.filter(delivery_id=gone.pk).exists()
    settings.STUDIO_NOTIFICATION_RETENTION_DAYS = settings.STUDIO_WEBHOOK_LOG_RETENTION_DAYS = 0
    Notification.objects.filter(pk=new_read.pk).update(read_at=now - timedelta(days=4000))
    assert svc.prune(now) == {"notifications": 0, "deliveries": 0}  # 0 keeps everything
