"""sift: a self-hosted web fetcher for programs."""

__version__ = "0.1.0"
