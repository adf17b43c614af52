"""The local executor's admission measured: how its prior's choices change a sweep's wall time."""
