"""Turning settings into a running sift."""
