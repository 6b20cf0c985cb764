"""Reports: per-step tables, knee points, SLA capacity, cost, HTML and JSON."""
