"""duraloop: a durable agent loop."""
