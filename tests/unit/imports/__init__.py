"""Unit tests of the CSV/TXT import pipeline (parser, row checks, settings)."""
