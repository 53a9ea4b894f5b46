"""Standard channel providers: pure parts (configs, signing, tables, helpers)."""
