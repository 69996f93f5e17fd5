"""Derived GPU health: state and score, their families (`state_families`, `memory_link_families`), history
trends and XID errors."""
