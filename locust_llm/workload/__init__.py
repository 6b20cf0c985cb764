"""What is sent: prompt sources, lengths, conversations and request bodies. Pure."""
