"""Load plans: step plans, open-loop arrivals, the capacity search and how its probes are judged. Pure."""
