"""``nnconform fuzz``: structure-aware fuzzing of a driver with mostly invalid models and
requests (the analogue of AOSP's driver fuzzer).  ``generate`` makes cases, ``runner`` runs
them through a driver host, buckets what crashes, hangs, runs out of memory or is slow,
shrinks each bucket to a minimal spec file and writes the journal and reports."""
