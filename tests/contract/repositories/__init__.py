"""One repository contract suite, run on SQLite and on PostgreSQL."""
