"""Probes: a door tried as a new user or an attacker would, printing what it saw."""
