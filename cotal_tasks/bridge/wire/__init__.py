"""The Cotal wire: the bridge as an ordinary Cotal service endpoint on NATS."""
