"""Bulk learning and scoring of files through the client: ``streamtree learn`` and ``streamtree predict``."""
