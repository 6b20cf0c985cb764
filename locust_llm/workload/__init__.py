"""What is sent: prompt sources and request bodies."""
