"""Standard channel providers against local vendor servers."""
