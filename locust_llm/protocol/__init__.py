"""One request on the wire: SSE decoding, the result of one request, the token estimate, client discipline. Pure."""
