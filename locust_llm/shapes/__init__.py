"""Load shapes: pure step plans (:mod:`.plan`) and the thin Locust shape classes around them."""
