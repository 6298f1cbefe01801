"""The process's open-file limit, raised at start.

Every connection of the HTTP listener, every database file and connection, the broker's
and the trackers' sockets take a file. A service manager or a shell often starts a
process with a soft limit (``ulimit -n``, often 1024) far below the hard one the system
allows it; the listener takes at most half the soft limit for connections
(``bridge.http.listener``), so a low one caps what the bridge serves for nothing.
``serve`` raises the soft limit to the hard one once, at start, and says so.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)


def raise_open_files() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (logged, with both numbers);
    the soft limit in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # a hard limit the system does not grant
        log.warning(
            "open files: the soft limit stays %d; raising it to the hard limit (%s) failed "
            "(%s). Raise it before the start (ulimit -n, or LimitNOFILE= in the service unit)",
            soft,
            _shown(hard),
            exc,
        )
        return soft
    log.info("open files: raised the soft limit from %d to the hard limit, %s", soft, _shown(hard))
    return hard


def _shown(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)
