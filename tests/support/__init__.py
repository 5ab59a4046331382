"""Shared fixtures and builders of the tests (no tests here).

``tests/conftest.py`` registers the modules that define fixtures as pytest plugins
(``pytest_plugins``), so a test asks for a fixture by name and imports only constants and
builders from here; no test module imports another test module.
"""
