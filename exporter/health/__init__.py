"""Derived GPU health: state and score, their families (`metrics`), history trends and XID errors."""
