"""The cluster tests' figures, printed in pytest's terminal summary (also without ``-s``)."""

from __future__ import annotations

import pytest

SUMMARY: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in SUMMARY:
        terminalreporter.write_line(line)
