"""Per-step measurement: histograms, the timeline, statistics, validity, rows, SLA, the knee rule. Pure."""
