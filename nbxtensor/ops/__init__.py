"""Operator families. Each module declares its ops in the registry when imported."""
