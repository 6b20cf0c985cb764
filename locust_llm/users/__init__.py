"""Locust ``User`` classes that stream chat completions and time them."""
