"""The math quiz engine for drill 03 (no UI): questions, answer parsing, checking."""
