"""An experiment from the browser, end to end (Debian Chromium through Playwright, the studio's live
server with its embedded runner: a thread of the web process, and the REAL model server of
``conftest_llm``: llama-cpp-python serving SmolLM2-135M-Instruct).

The path an author takes (the experiments issue, "Done when"): save a configuration version, start
a pilot on a studio task, cancel it while it runs, resume it, watch the questions' progress arrive
without reloading, and get scored runs. The model's skill is not asserted (a 135M model plans
badly): the states, the counts and the links are.
"""
from __future__ import annotations

import os
import re

import pytest
from conftest import requires_shared
from conftest_llm import start_llm_server
from support.browser import open_signed_in
from support.florence import FLORENCE
from support.mcp import make_task

from experiments.models import Experiment, ExperimentQuestion
from replay.services.runs import start_replay

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
    requires_shared(FLORENCE),
]

#: what tests/test_experiments_llm.py serves and configures, for the reasons given there
#: (docs/experiments.md, "Measured"): llama-cpp-python's function-calling format, tool answers as
#: user messages, a 2,048-token context, 48 completion tokens a call; here with a recursion limit
#: of 4 (at most 3 model calls a question, ``harness.steps_left``): the browser's path is tested
CHAT_FORMAT, N_CTX = "chatml-function-calling", 2048
REPEATS = 2
#: the slowest model call seen here was 80 s on a loaded machine: a question is at most 3 calls
QUESTION_MS = 6 * 60 * 1000


@pytest.fixture(scope="module")
def served():
    with start_llm_server(chat_format=CHAT_FORMAT, n_ctx=N_CTX) as s:
        yield s


def _status(page) -> str:
    return page.text_content("#exp-status").strip()


@pytest.mark.django_db(transaction=True)
def test_an_author_configures_starts_cancels_resumes_and_gets_scored_runs_in_the_browser(
        live_server, browser, served, settings):
    base_url, model = served
    settings.STUDIO_JUDGE_RUNNER = "thread"  # the embedded default: the job runs beside the web process
    settings.STUDIO_EXPERIMENT_BACKOFF_S = 0.05
    user, task = make_task()  # "ada": author and maintainer (maintainers may spend on an endpoint)
    assert start_replay(user, task).status == "succeeded"

    ctx, page = open_signed_in(browser, live_server, "ada", "pw-test-123")
    try:
        # a configuration version, saved from the form
        page.goto(f"{live_server.url}/experiments/")
        form = page.locator("#save-config form")
        form.locator("input[name=name]").fill("smol")
        form.locator("input[name=base_url]").fill(base_url)
        form.locator("input[name=model]").fill(model)
        form.locator("select[name=protocol]").select_option("IF")
        form.locator("select[name=tool_results]").select_option("user")
        form.locator("input[name=max_tokens]").fill("48")
        form.locator("input[name=max_steps]").fill("4")
        form.locator("button[type=submit]").click()
        page.wait_for_load_state()
        assert "saved configuration smol v1" in page.content()

        # a pilot of the task, two repeats
        start = page.locator("#start-experiment form")
        start.locator("select[name=release]").select_option("")
        start.locator("input[name=question_ids]").fill(task.question_id)
        start.locator("input[name=repeats]").fill(str(REPEATS))
        start.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r".*/experiments/\d+/$"))
        exp_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
        assert page.locator("#questions tr[data-q]").count() == REPEATS

        # cancel at once: a queued experiment ends at once, a running one at its next model call
        # (the question in flight stays unfinished); the page follows without a manual reload
        page.click("#exp-cancel")
        page.wait_for_function("() => document.getElementById('exp-status').textContent.trim() === 'cancelled'",
                               timeout=QUESTION_MS)
        exp = Experiment.objects.get(pk=exp_id)
        assert exp.status == "cancelled" and exp.stop_reason == "cancelled"
        unfinished = exp.questions.exclude(status=ExperimentQuestion.Status.DONE).count()
        assert unfinished >= REPEATS - 1  # at most the question in flight could finish
        finished_before = set(exp.questions.filter(status="done").values_list("pk", flat=True))
        assert page.locator("#exp-cancel").count() == 0 and page.locator("#exp-resume").count() == 1

        # resume: the page polls the API and shows each question's state and steps as they arrive
        page.click("#exp-resume")
        page.wait_for_load_state()
        page.wait_for_function(
            "() => [...document.querySelectorAll('#questions .q-status')].some(c => c.textContent.trim() === 'running')"
            " || document.getElementById('exp-status').textContent.trim() === 'done'", timeout=QUESTION_MS)
        page.wait_for_function("() => document.getElementById('exp-status').textContent.trim() === 'done'",
                               timeout=REPEATS * QUESTION_MS)
        page.wait_for_selector("text=Scored runs")
        links = page.locator("a[href^='/runs/']")
        exp.refresh_from_db()
        run_ids = sorted(exp.runs.values_list("pk", flat=True))
        assert len(run_ids) == REPEATS  # one scored run a repeat
        hrefs = {links.nth(i).get_attribute("href") for i in range(links.count())}
        assert {f"/runs/{r}/" for r in run_ids} <= hrefs
        # every question ended; what had finished before the cancel was not asked again
        rows = {q.pk: q for q in exp.questions.all()}
        assert {q.status for q in rows.values()} <= {"done", "error"}
        assert all(rows[pk].attempts == 1 for pk in finished_before)
        assert page.text_content("#exp-done").strip() == str(REPEATS)
        assert not page._errors
    finally:
        ctx.close()
