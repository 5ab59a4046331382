"""A tool call's GDAL environment: with cloud credentials in the process environment (a studio whose
files are in a bucket), rasterio builds a boto3 session for every GDAL operation it wraps in an
implicit ``Env``; a call through ``call_tool`` runs in one ``Env`` without a session
(``kernel.tools.base.gdal_scope``) and builds none. Counted on rasterio's own ``AWSSession``."""
import numpy as np
import pytest
import rasterio
import rasterio.session

from kernel.tools import call_tool, get_tool
from kernel.tools.base import CLOUD_CREDENTIAL_VARIABLES, gdal_scope
from kernel.tools.testing import make_ctx, write_tif

# 3x3 float raster; ">= 4" among valid pixels by hand: 4, 6, 7, 8 (NaN and the nodata -9999 never)
IMG = np.array([[1, 2, 3], [4, np.nan, 6], [7, 8, -9999]], dtype=np.float32)


@pytest.fixture
def sessions(monkeypatch):
    """The number of ``rasterio.session.AWSSession`` objects built, as a one-item list."""
    built = [0]
    original = rasterio.session.AWSSession.__init__

    def counting(self, *args, **kwargs):
        built[0] += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(rasterio.session.AWSSession, "__init__", counting)
    return built


@pytest.fixture
def credentials(monkeypatch):
    for name in CLOUD_CREDENTIAL_VARIABLES:
        monkeypatch.setenv(name, "studio-test")


@pytest.fixture
def ctx(tmp_path):
    c = make_ctx(tmp_path)
    write_tif(tmp_path / "data" / "f.tif", IMG, nodata=-9999)
    return c


def test_a_raster_tool_call_builds_no_cloud_session_when_credentials_are_in_the_environment(
        ctx, credentials, sessions):
    obs = call_tool("ras.threshold", {"image_path": "f.tif", "threshold": 4}, ctx)
    assert obs["selected_pixels"] == 4
    assert sessions[0] == 0


def test_the_same_work_outside_the_scope_builds_a_session_per_gdal_operation(ctx, credentials, sessions):
    # the behaviour the scope exists for (rasterio 1.4.4, env.py: Env.__init__ takes
    # Session.from_environ() when both variables are set): the tool's own function, called without
    # call_tool, opens the input and writes the mask, each in an implicit Env of its own
    spec = get_tool("ras.threshold")
    obs = spec.func(ctx, **{"image_path": "f.tif", "threshold": 4.0, "op": ">=", "true_value": 255})
    assert obs["selected_pixels"] == 4
    assert sessions[0] >= 2


def test_the_result_is_the_same_inside_and_outside_the_scope(ctx, credentials):
    inside = call_tool("ras.threshold", {"image_path": "f.tif", "threshold": 4}, ctx)
    with open(ctx.work_dir / inside["mask_path"], "rb") as fh:
        first = fh.read()
    (ctx.work_dir / inside["mask_path"]).unlink()
    spec = get_tool("ras.threshold")
    outside = spec.func(ctx, **{"image_path": "f.tif", "threshold": 4.0, "op": ">=", "true_value": 255})
    assert outside["mask_path"] == inside["mask_path"]
    with open(ctx.work_dir / outside["mask_path"], "rb") as fh:
        assert fh.read() == first


def test_the_scope_is_nothing_without_credentials(monkeypatch):
    for name in CLOUD_CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    scope = gdal_scope()
    assert not isinstance(scope, rasterio.Env)


def test_the_scope_keeps_an_environment_the_caller_opened(credentials, sessions):
    # a caller's Env (e.g. studio.storage.gdal_env with the bucket's session) stays the one in force
    with rasterio.Env(session=rasterio.session.DummySession()):
        assert not isinstance(gdal_scope(), rasterio.Env)
    assert isinstance(gdal_scope(), rasterio.Env)
    assert sessions[0] == 0


def test_an_artifact_png_of_the_replay_pages_builds_no_cloud_session(tmp_path, credentials, sessions):
    # the pages' GDAL reads outside the tools (replay.rendering.raster_png, behind an artifact's PNG)
    # use the same scope: before it, this one open built one session
    from replay.rendering import raster_png

    path = write_tif(tmp_path / "mask.tif", np.array([[0, 1], [2, 1]], dtype=np.uint8))
    sessions[0] = 0  # writing the test's raster, outside any scope, built one
    png = raster_png(path, {1: "flooded", 2: "dry"})
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert sessions[0] == 0
