"""The `cotal-tasks` command line."""
