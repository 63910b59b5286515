"""duraloop.log."""
