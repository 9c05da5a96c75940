"""Operator commands that answer scheduling questions without a cluster: `explain` and `admit`."""
