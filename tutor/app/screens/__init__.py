"""The app's screens: drill list, drill view, hints, quiz, pages and confirmations."""
