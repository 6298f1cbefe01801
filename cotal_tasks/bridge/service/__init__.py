"""The command service: the eight commands over any store, with paging, refusals and metrics."""
