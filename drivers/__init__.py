"""Driver adapters: the reference driver, real-runtime adapters, and deliberately broken drivers."""
