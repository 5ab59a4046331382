"""The studio's pages, one module per workflow step: events (data), tasks (authoring, review),
replays (gold), releases, runs, scoring (queue, verdicts, adjudication, judge), judge_report,
leaderboard, robustness; errors (the styled 403)."""
