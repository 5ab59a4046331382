"""Selectors of the evaluation app (reads for pages and the API), one module per sub-domain."""
