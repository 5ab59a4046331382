"""A release export from the browser ends in a download link from the bucket (issue 32, "Done
when"): in a real Chromium against the live server with a SeaweedFS bucket configured
(``tests/support/seaweedfs.py``), a maintainer presses "Export (zip)" on the release page, the job
table shows the finished zip, and its link downloads through the studio's 302 to the presigned URL,
straight from the bucket. The downloaded bytes are compared with the bucket's object (same SHA-256,
read with boto3)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from support.browser import open_signed_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
    pytest.mark.django_db(transaction=True),
]


def test_an_export_from_the_release_page_downloads_from_the_bucket(live_server, browser, make_user, bucket,
                                                                    seaweedfs, settings):
    from annotation.models import Task
    from releases.selectors import export_jobs
    from releases.services import lifecycle, release_import

    mona = make_user("mona", "maintainer", password="mona-pass-1")
    release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), make_release=False)
    lifecycle.create_release(mona, "1.0.0", "first", tasks=list(Task.objects.order_by("id")))
    ctx, page = open_signed_in(browser, live_server, "mona", "mona-pass-1", viewport=(1280, 900))
    try:
        page.goto(f"{live_server.url}/releases/1.0.0/")
        page.click("#export-form button[type=submit]")  # in-process without a broker: done when the page returns
        link = page.locator("#export-table a", has_text="dora-1.0.0.zip")
        link.wait_for()
        job, = export_jobs("1.0.0")
        assert link.get_attribute("href") == f"/releases/1.0.0/exports/{job['id']}/download/"
        with page.expect_download() as info:
            link.click()
        download = info.value
        assert download.url.startswith(f"{seaweedfs.endpoint}/{bucket}/exports/1.0.0/{job['id']}/dora-1.0.0.zip?")
        assert download.suggested_filename == "dora-1.0.0.zip"
        got = Path(download.path()).read_bytes()
        kept = seaweedfs.client().get_object(Bucket=bucket, Key=f"exports/1.0.0/{job['id']}/dora-1.0.0.zip")["Body"].read()
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(kept).hexdigest() and len(got) > 1000
        # nothing of the export stays on the web machine's disk (its scratch folder was removed)
        assert [p for p in (Path(settings.STUDIO_DATA_ROOT) / "exports").rglob("*") if not p.is_dir()] == []
        assert not page._errors, page._errors
    finally:
        ctx.close()
