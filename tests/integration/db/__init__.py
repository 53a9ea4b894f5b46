"""Schema, migration and engine behaviour on both databases."""
