"""The bridge process: its broker, its life from start to shutdown, and sync leadership."""
