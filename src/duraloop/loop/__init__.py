"""duraloop.loop."""
