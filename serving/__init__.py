"""The bundled serving tier: vLLM launch (GPU and CPU) and model preparation, the OpenAI-compatible
gateway (routing, sticky traffic split, client spans) and the load generator. Talks to the
collector over HTTP only.
"""
