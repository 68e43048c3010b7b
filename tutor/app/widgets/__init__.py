"""The app's widgets; each draws one part of a core object (a CheckResult, a VisitMap, history)."""
