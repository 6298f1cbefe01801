"""cotal-tasks: a tasks provider for Cotal spaces (the ``ai.cotal.tasks`` contract)."""

__version__ = "0.1.0"
