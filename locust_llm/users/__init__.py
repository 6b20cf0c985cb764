"""Locust user classes that stream chat completions and time them."""
