"""Tests for duraloop.llm."""
