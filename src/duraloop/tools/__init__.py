"""duraloop.tools."""
