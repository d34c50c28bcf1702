"""Integrations with other agent frameworks (Agent Zero)."""
