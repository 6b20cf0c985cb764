"""Per-step collection: tag samples with their step, merge across processes, write the per-step CSV."""
