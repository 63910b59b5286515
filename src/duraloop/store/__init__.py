"""duraloop.store."""
