"""Locust adapters: run state, lifecycle, recording, outputs, the web UI and the shape classes."""
