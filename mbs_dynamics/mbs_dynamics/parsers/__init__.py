"""Readers of robot descriptions."""
