"""Audience import benchmark: a real ``wepush serve`` process, CSV streamed through the public API."""
