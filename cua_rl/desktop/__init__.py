"""Local Linux desktops."""
