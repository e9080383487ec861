"""Cost: the token price table (USD per million tokens, cached input priced apart) and GPU cost
amortisation for self-hosted replicas.
"""
