"""The link-effects preset's result: its README from its committed cell table."""
