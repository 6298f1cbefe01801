"""The bridge's HTTP listener: read API, events, webhooks, health, metrics, dashboard."""
