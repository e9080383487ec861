"""Tests of the serving tier (gateway, routing, load generator, vLLM launch)."""
