"""A run zip's import job names the upload, never the server's folders (job
errors showed absolute server paths such as ``<data root>/runs/<random>/x_AP/…``).

The attack as found: a zip uploaded on the runs page whose record has no question id; the job
(the in-process "inline" runner, started as the request's on-commit hook starts it) fails with the
import's message. Expected, from ``evaluation.services.runs._check_records``' message: the file as it
lies in the zip, after the zip's name, and no part of ``STUDIO_DATA_ROOT``.
"""
from __future__ import annotations

import io
import json
import zipfile

import pytest

from evaluation.models import AgentRun, RunImportJob

pytestmark = [pytest.mark.urls("support.judging"), pytest.mark.django_db]


def _zip(entries: dict[str, str], name: str) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, text in entries.items():
            zf.writestr(path, text)
    buf.seek(0)
    buf.name = name
    return buf


@pytest.mark.parametrize("top", ["x_AP/", ""], ids=["folder-zipped", "contents-zipped"])
def test_a_failed_job_names_paths_inside_the_upload(client, maintainer, settings, top,
                                                    django_capture_on_commit_callbacks):
    settings.STUDIO_JUDGE_RUNNER = "inline"
    client.force_login(maintainer)
    record = json.dumps({"sample_id": "s1", "predicted_answer": {}, "trajectory": []})  # no question_id
    upload = _zip({f"{top}t1_perception_and_assessment/benchmark.jsonl": record + "\n",
                   f"{top}notes.txt": "a file beside the dimension folders"}, "x_AP.zip")
    with django_capture_on_commit_callbacks() as after_commit:
        r = client.post("/runs/", {"archive": upload, "agent": "x"})
    assert r.status_code == 302, r.content.decode()[:1000]
    for cb in after_commit:
        cb()
    job = RunImportJob.objects.get()
    assert job.status == "failed"
    inside = "x_AP/" if top else ""  # the zip's own folder, when the folder itself was zipped
    assert job.error.startswith(f"x_AP.zip: {inside}t1_perception_and_assessment/benchmark.jsonl: record 0: "
                                "field 'question_id'"), job.error
    assert str(settings.STUDIO_DATA_ROOT) not in job.error and "/runs/" not in job.error
    assert str(settings.STUDIO_DATA_ROOT.resolve()) not in job.error
    assert not AgentRun.objects.exists()
