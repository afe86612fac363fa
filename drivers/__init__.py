"""Driver adapters: the reference driver and the real-runtime adapters (the harness's own
deliberately broken test drivers live under tests/drivers/, outside the package)."""
