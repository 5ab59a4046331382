"""Releases: versioned snapshots of approved tasks, their export, import and diff (above replay)."""
