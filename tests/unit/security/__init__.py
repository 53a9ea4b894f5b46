"""Security building blocks: secret store, tokens, cursors, idempotency, redaction, HTTP hardening."""
