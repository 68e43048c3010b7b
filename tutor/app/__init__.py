"""The Textual app: a thin layer that shows the core objects (see tutor.app.main)."""
