"""The composition root: the one place that builds the process from the config and the
only part of the bridge that names concrete providers.

- ``endpoints``: one endpoint's store and command service (``open_endpoint``), for the
  process and for the CLI's offline commands (``sync``, ``history``, the seed);
- ``http``: the HTTP app with everything it serves (tokens, event feed, endpoints);
- ``process``: the whole running bridge (``running_bridge``): the broker, every
  endpoint with its wire server, the HTTP listener, and the background loops.

The package exports the endpoint part only: ``process`` imports the HTTP receivers,
which import ``Endpoint`` from here, so ``process`` is imported by its own name.
"""

from cotal_tasks.bridge.wiring.endpoints import (
    Endpoint,
    open_endpoint,
    open_store,
)

__all__ = ["Endpoint", "open_endpoint", "open_store"]
