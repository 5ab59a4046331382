"""A path a tool cannot find is reported under the argument the caller gave (``mask_path``,
``vector_path``, ``vector_a_path``), never under the resolver's own word ``path``: the event's
layer resolver (``replay.services.layers.LayerResolver``) leaves the argument to the tool's call."""
from __future__ import annotations

import pytest

from kernel.tools.base import ToolContext, ToolError
from kernel.tools.registry import call_tool
from replay.services.layers import LayerResolver


@pytest.mark.parametrize("tool, args, argument", [
    ("ras.vectorize", {"mask_path": "nosuch.png", "classes": [1]}, "mask_path"),
    ("ras.count_pixels", {"mask_path": "nosuch.png", "classes": [1]}, "mask_path"),
    ("vec.buffer", {"vector_path": "nosuch.geojson", "meter": 5.0}, "vector_path"),
    ("vec.intersect", {"vector_a_path": "nosuch.geojson", "vector_b_path": "other.geojson"}, "vector_a_path"),
])
def test_an_unknown_file_names_the_argument_the_caller_gave(tmp_path, tool, args, argument):
    # an event without layers: every bare name is neither a step output nor a layer
    ctx = ToolContext(work_dir=tmp_path, resolve_path=LayerResolver(event_id=0, layers=[]))
    with pytest.raises(ToolError) as err:
        call_tool(tool, args, ctx)
    assert err.value.argument == argument
    assert str(err.value).startswith(f"{tool}: argument '{argument}': 'nosuch.")
    assert "argument 'path'" not in str(err.value)
