"""duraloop.cli."""
