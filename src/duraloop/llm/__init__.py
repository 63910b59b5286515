"""duraloop.llm."""
